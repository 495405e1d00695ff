"""Fused linear layers for inference on the CPU.

oneDNN (PyTorch's ``mkldnn`` backend) applies an activation or a residual
addition as a post-op of the matrix product, so the output is written once
instead of being written, read back and written again by a separate
element-wise kernel. This helps most on the memory-bound layers of vision
transformers (the MLPs of early stages).

The fused operators have no autograd support: use them only where
:func:`can_fuse` says so (no gradient recording, CPU float32, no autocast);
elsewhere use the plain layers, which compute the same function.
"""
import functools

import torch
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
    """Whether oneDNN's operators may compute layers applied to ``x``.

    Args:
        x (Tensor): The input of the layers.

    Returns:
        bool: True for CPU float32 inputs without autocast, when the fused
        operators are available; False while tracing, scripting or
        compiling (exporters and compilers see plain layers).
    """
    return (x.device.type == 'cpu' and x.dtype == torch.float32
            and torch.backends.mkldnn.enabled
            and not torch.is_autocast_enabled('cpu') and not is_traced()
            and _fused_ops_work())


def can_fuse(x, training):
    """Whether the fused operators may compute the layers applied to ``x``.

    Args:
        x (Tensor): The input of the layers.
        training (bool): The module's training flag (dropout and stochastic
            depth must be off).

    Returns:
        bool: True for CPU float32 inference without autograd or autocast,
        when the fused operators are available; False while tracing,
        scripting or compiling (exporters and compilers see plain layers).
    """
    return (not training and not torch.is_grad_enabled()
            and onednn_computes(x))


def linear_gelu(x, linear):
    """``gelu(linear(x))`` (exact GELU) in one fused operator.

    Args:
        x (Tensor): Input of shape (..., in_features).
        linear (nn.Linear): The layer.

    Returns:
        Tensor: Shape (..., out_features).
    """
    return torch.ops.mkldnn._linear_pointwise(x, linear.weight, linear.bias,
                                              'gelu', [], 'none')


def linear_add(x, linear, other):
    """``other + linear(x)`` in one fused operator.

    Args:
        x (Tensor): Input of shape (..., in_features).
        linear (nn.Linear): The layer.
        other (Tensor): Added to the output; shape (..., out_features).

    Returns:
        Tensor: Shape (..., out_features).
    """
    return torch.ops.mkldnn._linear_pointwise.binary(x, other, linear.weight,
                                                     linear.bias, 'add')
