"""Train steps of every family on a GPU, each checked against a float32
eager reference: the plain model is what runs there.

Skipped where no CUDA device exists (every CPU-only machine, CI included).
Each family's backbone is the one of its RetinaNet config (S arch, four
feature maps), on a 2x3x224x288 batch, with every stochastic layer off
(drop-path, dropout), so that the eager, compiled and mixed-precision runs
compute the same function and only their rounding differs.

- Mixed precision, eager and ``torch.compile``: the outputs and the
  gradients of every parameter against float32 eager (TF32 off).
- The configs' fused AdamW on CUDA: its steps against PyTorch's
  single-tensor AdamW with the same settings.
- The attention routes (explicit products where no fused 16-bit kernel
  fits, the fused kernel elsewhere) against float64.
"""
import copy

import pytest
import torch
import torch._dynamo
from mmengine.optim import build_optim_wrapper
from dense_backbones import (DENSE_CONFIGS, config_of,
                             deterministic_backbone, probe_loss)
from mmengine.registry import DefaultScope

from mmtnt.models.layers.attention import (explicit_attention,
                                           scaled_dot_product_attention)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason='needs a CUDA device')

# Relative error (Frobenius norm of the difference over the reference's)
# allowed against float32, as a multiple of the unit roundoff u of the
# autocast dtype: 2**-11 for float16 (11 significant bits), 2**-8 for
# bfloat16 (8). Autocast rounds the inputs and outputs of every product
# and convolution to the dtype (accumulating in float32), so each layer adds
# a relative error of a few u, and the errors of the ~20 blocks of a
# backbone and of its backward pass add up to tens of u.
# The whole gradient (all parameters together) may be off by 16 u. Each
# parameter's may be off by 256 u: a few layers lose more than the rest to
# cancellation, e.g. PyramidTNT's stem convolutions, whose outputs are
# rounded before a BatchNorm subtracts their batch mean. Measured on an
# H200 (torch 2.11), eager: outputs 1-4 u, all gradients 1-16 u (PyramidTNT
# the most), the worst parameter 2-87 u (PyramidTNT's stem), the median
# 1-3 u; compiled float16 SVT: 160 u on one LSA projection. A wrong layer is
# off by about 100% (256 u in bfloat16, 2048 u in float16).
UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
ROUNDOFFS_ALLOWED = 16
ROUNDOFFS_ALLOWED_PER_PARAMETER = 256
# Gradients smaller than this fraction of the largest gradient norm of the
# model have their error measured against that fraction instead: such a
# gradient is a sum of many terms that mostly cancel (a norm's bias over
# thousands of tokens), and its relative error measures the cancellation.
NEGLIGIBLE_GRADIENT = 1e-2
# float16 training scales the loss so that small gradients do not flush to
# zero: mmengine's AmpOptimWrapper (PyTorch's GradScaler) starts at 2**16.
LOSS_SCALE = {torch.float16: 2.0**16}
def forward_backward(model, images, dtype=None, compile=False):
    """One forward pass (under autocast to ``dtype`` if given) and one
    backward pass of :func:`probe_loss`; returns the outputs and the
    gradients by name, in float32."""
    forward = torch.compile(model, fullgraph=True) if compile else model
    model.zero_grad(set_to_none=True)
    with torch.autocast('cuda', dtype=dtype or torch.float32,
                        enabled=dtype is not None):
        outs = forward(images)
    scale = LOSS_SCALE.get(dtype, 1.)
    (probe_loss(outs) * scale).backward()
    grads = {
        name: p.grad.float() / scale
        for name, p in model.named_parameters()
    }
    return [out.detach().float() for out in outs], grads


def relative_error(actual, expected, scale=None):
    """``|actual - expected| / |expected|`` in the Frobenius norm (over
    ``scale`` instead, when given)."""
    scale = float(expected.norm()) if scale is None else scale
    return float((actual - expected).norm()) / max(scale, 1e-30)


@pytest.fixture
def fp32_reference():
    """float32 on the GPU without TF32 (cuDNN's convolutions use it by
    default), and a fresh dynamo cache."""
    saved = (torch.backends.cuda.matmul.allow_tf32,
             torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    (torch.backends.cuda.matmul.allow_tf32,
     torch.backends.cudnn.allow_tf32) = saved


@pytest.mark.parametrize('compile', [False, True], ids=['eager', 'compiled'])
@pytest.mark.parametrize(
    'dtype', [torch.float16, torch.bfloat16], ids=['float16', 'bfloat16'])
@pytest.mark.parametrize('family', list(DENSE_CONFIGS))
def test_amp_train_step_against_fp32(family, dtype, compile,
                                     fp32_reference):
    if dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        pytest.skip('this GPU has no bfloat16')
    model = deterministic_backbone(config_of(family)).cuda()
    amp_model = copy.deepcopy(model)
    torch.manual_seed(1)
    images = torch.randn(2, 3, 224, 288, device='cuda')

    ref_outs, ref_grads = forward_backward(model, images)
    outs, grads = forward_backward(amp_model, images, dtype, compile)

    tolerance = ROUNDOFFS_ALLOWED * UNIT_ROUNDOFF[dtype]
    for i, (out, ref) in enumerate(zip(outs, ref_outs)):
        assert out.shape == ref.shape
        error = relative_error(out, ref)
        assert error <= tolerance, f'output {i}: relative error {error:.1e}'
    names = list(ref_grads)
    for name in names:
        assert torch.isfinite(grads[name]).all(), name
    error = relative_error(
        torch.cat([grads[name].flatten() for name in names]),
        torch.cat([ref_grads[name].flatten() for name in names]))
    assert error <= tolerance, f'all gradients: relative error {error:.1e}'
    tolerance = ROUNDOFFS_ALLOWED_PER_PARAMETER * UNIT_ROUNDOFF[dtype]
    largest = max(float(grad.norm()) for grad in ref_grads.values())
    for name, ref in ref_grads.items():
        scale = max(float(ref.norm()), NEGLIGIBLE_GRADIENT * largest)
        error = relative_error(grads[name], ref, scale)
        assert error <= tolerance, f'{name}: relative error {error:.1e}'


@pytest.mark.parametrize('family', list(DENSE_CONFIGS))
def test_fused_adamw_steps_on_cuda(family):
    """The optimizer the config builds (``fused=True``) steps the CUDA
    parameters as the single-tensor AdamW does."""
    cfg = config_of(family)
    assert cfg.optim_wrapper.optimizer.get('fused') is True
    fused_model = deterministic_backbone(cfg).cuda()
    loop_model = copy.deepcopy(fused_model)
    # The config's mmdet base tags the wrapper with mmdet's scope, whose
    # registry imports all of mmdet; mmengine's builds the same OptimWrapper
    # and torch AdamW.
    fused_cfg = copy.deepcopy(cfg.optim_wrapper)
    fused_cfg.pop('_scope_', None)
    loop_cfg = copy.deepcopy(fused_cfg)
    loop_cfg.optimizer.update(fused=False, foreach=False)
    with DefaultScope.overwrite_default_scope('mmengine'):
        fused = build_optim_wrapper(fused_model, fused_cfg)
        loop = build_optim_wrapper(loop_model, loop_cfg)
    assert fused.optimizer.defaults['fused'] is True

    generator = torch.Generator(device='cuda').manual_seed(0)
    for _ in range(3):
        for p_fused, p_loop in zip(fused_model.parameters(),
                                   loop_model.parameters()):
            grad = torch.randn(
                p_fused.shape, device='cuda', generator=generator)
            p_fused.grad, p_loop.grad = grad, grad.clone()
        fused.step()
        loop.step()
    for (name, p_fused), p_loop in zip(fused_model.named_parameters(),
                                       loop_model.parameters()):
        torch.testing.assert_close(
            p_fused, p_loop, rtol=1e-5, atol=1e-7, msg=name)
    # The steps moved the parameters (a no-op optimizer would pass the
    # comparison): Adam's first step moves each weight by about lr.
    start = deterministic_backbone(cfg).cuda()
    with torch.no_grad():
        moved = max(
            float((p - p0).abs().max())
            for p, p0 in zip(fused_model.parameters(), start.parameters()))
    assert moved >= cfg.optim_wrapper.optimizer.lr


@pytest.mark.parametrize('keys, head_dim', [(16, 6), (16, 10), (49, 32)])
@pytest.mark.parametrize(
    'dtype', [torch.float16, torch.bfloat16], ids=['float16', 'bfloat16'])
def test_attention_route_on_cuda_against_float64(dtype, keys, head_dim):
    """The routed attention (explicit products for TNT's head dims 6 and
    10, the fused kernel for 49 keys of head dim 32) and PyTorch's fused
    attention, outputs and input gradients, against float64; the same
    bound as on the CPU (tests/test_models/test_attention_route.py)."""
    if dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        pytest.skip('this GPU has no bfloat16')
    generator = torch.Generator(device='cuda').manual_seed(0)
    shape = (512, 4, keys, head_dim)
    inputs = [
        torch.randn(shape, device='cuda', dtype=torch.float64,
                    generator=generator) for _ in range(4)
    ]
    grad_out = inputs.pop()

    def run(attention, run_dtype):
        leaves = [
            t.detach().clone().to(run_dtype).requires_grad_()
            for t in inputs
        ]
        out = attention(*leaves)
        out.backward(grad_out.to(run_dtype))
        return [out] + [leaf.grad for leaf in leaves]

    reference = run(explicit_attention, torch.float64)
    tolerance = 3 * UNIT_ROUNDOFF[dtype]
    for attention in (scaled_dot_product_attention,
                      torch.nn.functional.scaled_dot_product_attention):
        for name, result, expected in zip(['output', 'query', 'key', 'value'],
                                          run(attention, dtype), reference):
            assert result.dtype == dtype
            error = relative_error(result.double(), expected)
            assert error <= tolerance, f'{attention.__name__} {name}: {error}'
