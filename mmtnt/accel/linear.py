"""Linear layers whose CPU float32 products run on oneDNN, which, unlike
MKL, takes its fast code path on CPUs of every vendor. Elsewhere (GPUs,
other dtypes, autocast, tracers) the plain layers compute the same function.
"""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F


def is_traced():
    """Whether ``torch.jit`` or ``torch.compile`` is recording: the CPU fast
    paths then step aside so that exporters and compilers see plain layers."""
    return (torch.jit.is_tracing() or torch.jit.is_scripting()
            or torch.compiler.is_compiling())


@functools.lru_cache(maxsize=None)
def _fused_ops_work():
    """Whether the fused oneDNN operators exist and agree with the plain
    ones (checked once)."""
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
    """Whether oneDNN may compute layers on ``x``: CPU float32, no autocast,
    not traced, operators available."""
    return (x.device.type == 'cpu' and x.dtype == torch.float32
            and torch.backends.mkldnn.enabled
            and not torch.is_autocast_enabled('cpu') and not is_traced()
            and _fused_ops_work())


def can_fuse(x, training):
    """Whether the fused operators may run: :func:`onednn_computes` in
    inference without autograd."""
    return (not training and not torch.is_grad_enabled()
            and onednn_computes(x))


def uses_onednn(x, weight):
    """Whether :func:`linear` computes ``x`` and ``weight`` on oneDNN."""
    return weight.dtype == torch.float32 and onednn_computes(x)


def records_gradients(*tensors):
    """Whether autograd records an operation on ``tensors`` (None skipped)."""
    return torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in tensors)


def onednn_matmul(a, b_t, bias=None):
    """``a @ b_t.T (+ bias)`` of 2-D CPU tensors on oneDNN, no autograd."""
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
    """``F.linear`` on 2-D inputs, forward and input gradient on oneDNN."""

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

    Examples:
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
    """:class:`torch.nn.Linear` computed by :func:`linear`; same state dict."""

    def forward(self, x):
        return linear(x, self.weight, self.bias)
