"""The plain models use only stock PyTorch modules and operators, and
``mmtnt.accelerate_for_cpu`` turns them into CPU models that compute the
same function, with the same parameters and state dict."""
import copy
import functools
import glob
import importlib
import logging
import os.path as osp

import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.logging import MMLogger
from tiny_backbones import TINY_BACKBONES

import mmtnt
from mmtnt.accel import CPU_VERSIONS, is_accelerated
from mmtnt.accel.api import BACKBONE_CPU_VERSIONS
from mmtnt.accel.linear import can_fuse
from mmtnt.models.layers import TransformerBlock
from mmtnt.registry import MODELS

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
gelu_mlp_module = importlib.import_module('mmtnt.accel.gelu_mlp')

FAMILIES = TINY_BACKBONES
INPUT_SHAPE = (2, 3, 64, 88)


def build(name, seed=0, **kwargs):
    torch.manual_seed(seed)
    model = FAMILIES[name](**kwargs)
    model.init_weights()
    # Non-trivial norms, so that a norm applied twice or not at all shows.
    for module in model.modules():
        if isinstance(module, nn.LayerNorm) and module.weight is not None:
            nn.init.normal_(module.weight, 1, 0.2)
            nn.init.normal_(module.bias, 0, 0.2)
    return model


def custom_functions(output):
    """The custom autograd ``Function`` nodes in ``output``'s graph."""
    found, seen, stack = [], set(), [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            found.append(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return found


def values_and_grads(model, x, autocast_dtype=None):
    """The outputs of one train-mode forward pass and the gradients of a
    weighted sum of them."""
    model.zero_grad(set_to_none=True)
    context = torch.autocast('cpu', dtype=autocast_dtype) \
        if autocast_dtype else torch.autocast('cpu', enabled=False)
    with context:
        outs = model(x)
    loss = sum((out.float() * torch.linspace(-1, 1, out.shape[1]).view(
        1, -1, *[1] * (out.dim() - 2))).sum() for out in outs)
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    return [out.detach().float() for out in outs], grads


def assert_relative_close(actual, expected, tolerance, name):
    """``actual`` equals ``expected`` within ``tolerance`` times the largest
    magnitude of ``expected``."""
    scale = max(float(expected.abs().max()), 1e-12)
    error = float((actual.float() - expected.float()).abs().max()) / scale
    assert error <= tolerance, f'{name}: relative error {error:.2e}'


@functools.lru_cache(maxsize=None)
def imagenet_backbones():
    """``model.backbone`` of every ImageNet config (parsed once)."""
    paths = sorted(
        glob.glob(osp.join(REPO, 'configs', '*', '*_in1k*.py')))
    return {
        osp.basename(path)[:-3]: Config.fromfile(path).model.backbone
        for path in paths
    }


@pytest.mark.parametrize('name', list(FAMILIES))
def test_plain_train_step_uses_stock_modules_only(name):
    model = build(name, out_type='featmap', out_indices=-1).train()
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert linears and all(type(m) is nn.Linear for m in linears)
    assert not is_accelerated(model)
    outs = model(torch.randn(*INPUT_SHAPE))
    assert custom_functions(sum(out.sum() for out in outs)) == []


@pytest.mark.parametrize('config', list(imagenet_backbones()))
def test_every_imagenet_arch_is_plain(config):
    """Built on the meta device: only the module types matter."""
    with torch.device('meta'):
        model = MODELS.build(imagenet_backbones()[config])
    assert not is_accelerated(model)
    # The accelerator swaps by exact type: every layer of mmtnt's and every
    # instance of a plain class (a subclass would stay plain) must be one
    # of CPU_VERSIONS, and so must every transformer block's attention and
    # MLP.
    layers = {
        type(m)
        for m in model.modules() if isinstance(m, tuple(CPU_VERSIONS))
        or type(m).__module__.startswith('mmtnt.models.layers')
    }
    assert layers <= set(CPU_VERSIONS), layers - set(CPU_VERSIONS)
    blocks = [m for m in model.modules() if isinstance(m, TransformerBlock)]
    assert blocks and all(
        type(block.attn) in CPU_VERSIONS and type(block.mlp) in CPU_VERSIONS
        for block in blocks)


@pytest.mark.parametrize('name', list(FAMILIES))
def test_accelerated_model_keeps_parameters_and_state_dict(name):
    model = build(name)
    params = {n: p for n, p in model.named_parameters()}
    keys = list(model.state_dict())
    plain_types = {n: type(m) for n, m in model.named_modules()}
    assert mmtnt.accelerate_for_cpu(model) is model
    assert is_accelerated(model)
    assert {n: p for n, p in model.named_parameters()} == params
    assert list(model.state_dict()) == keys
    # Every plain layer became its CPU version, and nothing else changed.
    cpu_versions = {**CPU_VERSIONS, **BACKBONE_CPU_VERSIONS}
    assert {n: type(m) for n, m in model.named_modules()} == {
        n: cpu_versions.get(t, t)
        for n, t in plain_types.items()
    }
    for conv in (m for m in model.modules() if isinstance(m, nn.Conv2d)):
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    # Checkpoints go both ways.
    plain = build(name, seed=1)
    plain.load_state_dict(model.state_dict())
    model.load_state_dict(build(name, seed=2).state_dict())


def test_only_backbone_convolutions_become_channels_last():
    """Heads may hand their maps to operators that assume NCHW (mmcv's
    RoIAlign on the CPU reads channels-last maps wrongly)."""
    head = nn.Conv2d(8, 4, 3)
    model = mmtnt.accelerate_for_cpu(nn.Sequential(build('PCPVT'), head))
    assert model[0].stages[0].patch_embed.proj.weight.is_contiguous(
        memory_format=torch.channels_last)
    assert type(head) is nn.Conv2d and head.weight.is_contiguous()


# PyramidTNT's stem convolutions sum their weight gradients over every
# pixel: at 256x256 the sums are long enough for the kernel's summation
# order to show. There, convolutions with channels-last weights put 32 of
# the 166 tensors on one thread, 15 on two, more than 10 times further off
# float64 than the plain model (up to 4e-4 against 1e-5). Chunked MLPs are
# forced on (they start at sizes far beyond a test's), in chunks that grow
# with the input.
#: Family name -> the input shape and MLP chunk bytes of its test.
GRADIENT_CASES = dict.fromkeys(FAMILIES, (INPUT_SHAPE, 1024))
GRADIENT_CASES['PyramidTNT'] = ((2, 3, 256, 256), 64 * 1024)
# Reordering a float32 sum changes it by a few 1e-7 of its largest term
# even where the plain model happens to land nearer float64 than that:
# within 10 * 1e-6 relative, either model is as exact as float32 allows.
FLOAT32_ERROR_FLOOR = 1e-6


def outputs_and_grads(model, x):
    """:func:`values_and_grads` in one dict: ``'output 0'``, ... and the
    parameter names."""
    outs, grads = values_and_grads(model, x)
    return {**{f'output {i}': out for i, out in enumerate(outs)}, **grads}


def relative_errors(values, exact):
    """Each tensor's largest deviation from ``exact``'s, relative to the
    largest magnitude of ``exact``'s."""
    return {
        key: float((values[key].double() - exact[key].double()).abs().max()
                   / exact[key].double().abs().max())
        for key in exact
    }


@pytest.mark.parametrize('name', list(FAMILIES))
def test_values_and_gradients_as_exact_as_the_plain_models(
        name, monkeypatch):
    """On one and two threads, every output and gradient of the
    accelerated model is within 10 times the plain model's own error
    against float64 (at least :data:`FLOAT32_ERROR_FLOOR`), chunked MLPs
    included. The float64 outputs are rounded to float32 (6e-8 relative,
    far below the floor)."""
    shape, chunk_bytes = GRADIENT_CASES[name]
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_ABOVE_BYTES', 4096)
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_BYTES', chunk_bytes)
    plain = build(name, out_type='featmap', out_indices=-1).train()
    accelerated = mmtnt.accelerate_for_cpu(copy.deepcopy(plain))
    x = torch.randn(*shape)
    exact = outputs_and_grads(copy.deepcopy(plain).double(), x.double())
    threads = torch.get_num_threads()
    try:
        for num_threads in (1, 2):
            torch.set_num_threads(num_threads)
            plain_errors = relative_errors(outputs_and_grads(plain, x),
                                           exact)
            errors = relative_errors(outputs_and_grads(accelerated, x),
                                     exact)
            for key, error in errors.items():
                bound = 10 * max(plain_errors[key], FLOAT32_ERROR_FLOOR)
                assert error <= bound, (
                    f'{num_threads} thread(s), {key}: {error:.1e} off '
                    f'float64, the plain model {plain_errors[key]:.1e}')
    finally:
        torch.set_num_threads(threads)


# bfloat16 keeps 8 bits of mantissa: one rounding is 2**-9 = 2e-3 relative.
# Both models round at different places: the accelerator's MLP casts its
# input once and sums chunk gradients in float32, and its attention takes
# the explicit route, whose logits are rounded to bfloat16 (PyTorch's fused
# kernel keeps them in float32). Measured on the tiny PyramidTNT: the
# gradient of stage 1's word-MLP bias is 1.6e-2 of its scale off float64
# with the accelerator, 4.4e-3 without.
BF16_TOLERANCE = 5e-2


@pytest.mark.parametrize('name', list(FAMILIES))
def test_close_values_and_gradients_under_bfloat16_autocast(
        name, monkeypatch):
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_ABOVE_BYTES', 2048)
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_BYTES', 512)
    plain = build(name, out_type='featmap', out_indices=-1)
    accelerated = mmtnt.accelerate_for_cpu(copy.deepcopy(plain))
    x = torch.randn(*INPUT_SHAPE)
    outs, grads = values_and_grads(plain.train(), x, torch.bfloat16)
    fast_outs, fast_grads = values_and_grads(accelerated.train(), x,
                                             torch.bfloat16)
    for out, fast_out in zip(outs, fast_outs):
        assert_relative_close(fast_out, out, BF16_TOLERANCE, 'output')
    for key, grad in grads.items():
        assert fast_grads[key].dtype == torch.float32, key
        assert_relative_close(fast_grads[key], grad, BF16_TOLERANCE, key)


@pytest.mark.parametrize('name', list(FAMILIES))
def test_fused_inference_matches_the_plain_model(name):
    plain = build(name, out_type='featmap', out_indices=-1).eval()
    accelerated = mmtnt.accelerate_for_cpu(copy.deepcopy(plain))
    x = torch.randn(*INPUT_SHAPE)
    assert can_fuse(x, training=False) is False  # gradients are on here
    with torch.no_grad():
        assert can_fuse(x, training=False)
        for out, fast_out in zip(plain(x), accelerated(x)):
            assert_relative_close(fast_out, out, 1e-5, 'output')
        # Exporters and compilers see the plain layers' operators.
        traced = torch.jit.trace(accelerated, x, check_trace=False)
    assert '_linear_pointwise' not in str(traced.inlined_graph)


def test_chunked_bfloat16_weight_gradients_are_summed_in_float32(
        monkeypatch):
    """Over many chunks, bfloat16 sums of the chunks' weight gradients
    would drift from the single product plain autocast computes."""
    from mmtnt.accel import accelerate_for_cpu
    from mmtnt.models.layers import Mlp
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_ABOVE_BYTES', 1024)
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_BYTES', 256)
    torch.manual_seed(0)
    plain = Mlp(16, 64)
    accelerated = accelerate_for_cpu(copy.deepcopy(plain))
    x = torch.randn(4096, 16) + 1  # 2048 chunks of 2 rows
    grads = []
    for mlp in (plain, accelerated):
        with torch.autocast('cpu', dtype=torch.bfloat16):
            mlp(x).float().sum().backward()
        grads.append(mlp.fc1.weight.grad)
    assert grads[1].dtype == torch.float32
    assert_relative_close(grads[1], grads[0], 1e-2, 'fc1.weight')


def test_model_on_another_device_is_left_unchanged():
    model = build('PCPVT').to('meta')
    logger = MMLogger.get_current_instance()
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        assert mmtnt.accelerate_for_cpu(model) is model
    finally:
        logger.removeHandler(handler)
    assert not is_accelerated(model)
    assert any('not the CPU' in r.getMessage() for r in records)


@pytest.mark.parametrize('name', list(FAMILIES))
def test_accelerated_model_trains_with_cp(name):
    """with_cp, set after the model is built, recomputes the accelerated
    blocks and gives the same gradients."""
    model = mmtnt.accelerate_for_cpu(build(name, out_type='featmap'))
    x = torch.randn(*INPUT_SHAPE)
    _, grads = values_and_grads(model.train(), x)
    model.with_cp = True
    _, cp_grads = values_and_grads(model, x)
    for key, grad in grads.items():
        assert_relative_close(cp_grads[key], grad, 1e-6, key)
