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
    assert {n: type(m) for n, m in model.named_modules()} == {
        n: CPU_VERSIONS.get(t, t)
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
    assert head.weight.is_contiguous()


@pytest.mark.parametrize('name', list(FAMILIES))
def test_same_values_and_gradients_in_float32(name, monkeypatch):
    """Within 1e-5 relative; where the plain model's own float32 rounding
    is of that order (PyramidTNT's stem, 8e-6 off float64), within twice
    that more. Chunked MLPs included (forced on here: they start at sizes
    far beyond a test's).

    The gradients are compared with the plain model's whose convolutions
    are stored channels-last as the accelerator stores them: their weight
    gradients are then summed in another order, by the thread count. On
    one thread (a pytest-xdist worker) PyramidTNT's stem gradient is 6.9e-5
    off float64 in that layout, with or without the accelerator, and
    3.3e-6 in the plain NCHW layout; on two threads 7.8e-6 and 3.3e-6."""
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_ABOVE_BYTES', 4096)
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_BYTES', 1024)
    plain = build(name, out_type='featmap', out_indices=-1)
    accelerated = mmtnt.accelerate_for_cpu(copy.deepcopy(plain))
    same_layout = copy.deepcopy(plain)
    for conv in same_layout.modules():
        if isinstance(conv, nn.Conv2d):
            conv.to(memory_format=torch.channels_last)
    x = torch.randn(*INPUT_SHAPE)
    outs, grads = values_and_grads(plain.train(), x)
    _, same_layout_grads = values_and_grads(same_layout.train(), x)
    _, exact_grads = values_and_grads(
        copy.deepcopy(plain).double().train(), x.double())
    fast_outs, fast_grads = values_and_grads(accelerated.train(), x)
    for out, fast_out in zip(outs, fast_outs):
        assert_relative_close(fast_out, out, 1e-5, 'output')
    for key, grad in grads.items():
        exact = exact_grads[key]
        plain_error = float((grad.double() - exact).abs().max() /
                            exact.abs().max())
        assert_relative_close(fast_grads[key], same_layout_grads[key],
                              1e-5 + 2 * plain_error, key)


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
