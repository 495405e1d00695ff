"""Linear layers whose CPU float32 products run on oneDNN.

PyTorch computes float32 matrix products on the CPU with its BLAS (MKL in
the official wheels), which takes a narrower code path on CPUs of other
vendors; oneDNN (PyTorch's ``mkldnn`` backend) does not. :func:`linear`
runs a layer's forward product and the product that gives the input's
gradient on oneDNN; the weight's gradient, a product over all tokens of two
transposed operands, stays on the BLAS (docs/benchmarks.md says why).

In inference, oneDNN also applies an activation or a residual addition as
a post-op of the product (:func:`linear_gelu`, :func:`linear_add`), so the
output is written once instead of being written, read back and written
again by an element-wise kernel. These fused operators have no autograd
support: use them only where :func:`can_fuse` says so.

Elsewhere (GPUs, other dtypes, autocast, tracers and compilers, builds
without oneDNN) the plain layers compute the same function.
"""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

from .tracing import is_traced


@functools.lru_cache(maxsize=None)
def _fused_ops_work():
    """Whether this PyTorch build has the fused oneDNN linear operators and
    they agree with the plain ones (checked once)."""
    try:
        op = torch.ops.mkldnn._linear_pointwise
        if not torch.backends.mkldnn.is_available():
            return False
        gen = torch.Generator().manual_seed(0)
        x, other = torch.randn(3, 4, generator=gen), torch.randn(3, 5,
                                                                 generator=gen)
        weight, bias = torch.randn(5, 4, generator=gen), torch.randn(
            5, generator=gen)
        with torch.no_grad():
            gelu = op(x, weight, bias, 'gelu', [], 'none')
            add = op.binary(x, other, weight, bias, 'add')
            plain = F.linear(x, weight, bias)
        return bool(
            torch.allclose(gelu, F.gelu(plain), atol=1e-5)
            and torch.allclose(add, plain + other, atol=1e-5))
    except (AttributeError, RuntimeError):
        return False


def onednn_computes(x):
    """Whether oneDNN's operators may compute layers applied to ``x``: CPU
    float32 without autocast, outside tracers and compilers (which see the
    plain layers), when the operators are available."""
    return (x.device.type == 'cpu' and x.dtype == torch.float32
            and torch.backends.mkldnn.enabled
            and not torch.is_autocast_enabled('cpu') and not is_traced()
            and _fused_ops_work())


def can_fuse(x, training):
    """Whether the fused operators may compute the layers applied to ``x``:
    :func:`onednn_computes` in inference (``training`` off, dropout and
    stochastic depth with it) without autograd."""
    return (not training and not torch.is_grad_enabled()
            and onednn_computes(x))


def uses_onednn(x, weight):
    """Whether :func:`linear` computes ``x`` and a float32 ``weight`` on
    oneDNN (:func:`onednn_computes`)."""
    return weight.dtype == torch.float32 and onednn_computes(x)


def records_gradients(*tensors):
    """Whether autograd records an operation on ``tensors`` (None ones
    skipped): gradients are enabled and one of them requires a gradient."""
    return torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in tensors)


def onednn_matmul(a, b_t, bias=None):
    """``a @ b_t.T (+ bias)`` of 2-D CPU tensors (M, K) and (N, K) on
    oneDNN, without autograd; ``b_t`` may be a transposed view."""
    return torch.ops.mkldnn._linear_pointwise(a, b_t, bias, 'none', [], '')


def linear_gelu(x, linear):
    """``gelu(linear(x))`` (exact GELU) in one fused operator."""
    return torch.ops.mkldnn._linear_pointwise(x, linear.weight, linear.bias,
                                              'gelu', [], 'none')


def linear_add(x, linear, other):
    """``other + linear(x)`` in one fused operator."""
    return torch.ops.mkldnn._linear_pointwise.binary(x, other, linear.weight,
                                                     linear.bias, 'add')


class _OneDnnLinearFunction(torch.autograd.Function):
    """``F.linear`` on 2-D inputs with the forward and input-gradient
    products on oneDNN."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return onednn_matmul(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad_x = onednn_matmul(grad_out, weight.t()) if needs[0] else None
        grad_weight = grad_out.t().mm(x) if needs[1] else None
        grad_bias = grad_out.sum(0) if needs[2] and ctx.has_bias else None
        return grad_x, grad_weight, grad_bias


def linear(x, weight, bias=None):
    """:func:`torch.nn.functional.linear`, on oneDNN for CPU float32.

    Args:
        x (Tensor): Input of shape (..., in_features).
        weight (Tensor): Shape (out_features, in_features).
        bias (Tensor, optional): Shape (out_features, ).

    Returns:
        Tensor: Shape (..., out_features).

    Examples:
        >>> import torch
        >>> x, weight = torch.rand(2, 5, 8), torch.rand(4, 8)
        >>> torch.allclose(linear(x, weight), x @ weight.T, atol=1e-5)
        True
    """
    if not uses_onednn(x, weight):
        return F.linear(x, weight, bias)
    rows = x.reshape(-1, x.shape[-1])
    if records_gradients(x, weight, bias):
        out = _OneDnnLinearFunction.apply(rows, weight, bias)
    else:
        out = onednn_matmul(rows, weight, bias)
    return out.view(*x.shape[:-1], weight.shape[0])


class OneDnnLinear(nn.Linear):
    """:class:`torch.nn.Linear` computed by :func:`linear` (oneDNN for CPU
    float32); same parameters and state dict keys.

    Examples:
        >>> import torch
        >>> OneDnnLinear(8, 4)(torch.rand(2, 5, 8)).shape
        torch.Size([2, 5, 4])
    """

    def forward(self, x):
        return linear(x, self.weight, self.bias)
