"""Linear layers whose CPU float32 products run on oneDNN, in training too.

PyTorch computes float32 matrix products on the CPU with its BLAS (MKL in
the official wheels), which takes a narrower code path on CPUs of other
vendors; oneDNN (PyTorch's ``mkldnn`` backend) does not. :func:`linear`
runs a layer's forward product and the product that gives the input's
gradient on oneDNN; the weight's gradient, a product over all tokens of two
transposed operands, stays on the BLAS. This split was chosen by timing
both on one CPU (docs/benchmarks.md, "Where the accelerator's thresholds
come from"). The results are the same products up to float32 rounding.

Elsewhere (GPUs, other dtypes, autocast, tracers and compilers, builds
without oneDNN) :func:`linear` is :func:`torch.nn.functional.linear`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .fusion import onednn_computes


def uses_onednn(x, weight):
    """Whether :func:`linear` computes ``x`` and ``weight`` on oneDNN.

    Args:
        x (Tensor): The input.
        weight (Tensor): The layer's weight.

    Returns:
        bool: True for CPU float32 inputs and weights without autocast,
        outside tracers and compilers, when oneDNN is available.
    """
    return weight.dtype == torch.float32 and onednn_computes(x)


def records_gradients(*tensors):
    """Whether autograd records an operation on ``tensors`` (None ones
    skipped): gradients are enabled and one of them requires a gradient."""
    return torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in tensors)


def onednn_matmul(a, b_t, bias=None):
    """``a @ b_t.T (+ bias)`` of 2-D CPU tensors on oneDNN (no
    autograd).

    Args:
        a (Tensor): Shape (M, K).
        b_t (Tensor): Shape (N, K); may be a transposed view.
        bias (Tensor, optional): Shape (N, ).

    Returns:
        Tensor: Shape (M, N).
    """
    return torch.ops.mkldnn._linear_pointwise(a, b_t, bias, 'none', [], '')


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
