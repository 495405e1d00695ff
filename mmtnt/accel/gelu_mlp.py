"""A two-layer GELU MLP that keeps less for its backward pass and runs
large inputs in row chunks, which glibc reuses from the heap instead of
mapping fresh pages (docs/benchmarks.md says how the sizes were chosen).
"""
from typing import Callable, NamedTuple, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .linear import onednn_matmul, records_gradients, uses_onednn

#: Hidden-width tensors above this size are computed in row chunks.
CHUNK_ABOVE_BYTES = 32 * 2**20
#: The hidden-width size of one chunk.
CHUNK_BYTES = 2 * 2**20


def rows_per_chunk(rows, hidden_features, element_size):
    """How many of ``rows`` to compute at once: all if the hidden tensor
    fits in :data:`CHUNK_ABOVE_BYTES`, else about :data:`CHUNK_BYTES`."""
    row_bytes = hidden_features * element_size
    if rows * row_bytes <= CHUNK_ABOVE_BYTES:
        return rows
    return max(1, CHUNK_BYTES // row_bytes)


def _accumulate(total, a, b, dtype):
    """``total + a @ b`` in place (``a @ b`` in ``dtype`` if no total)."""
    if total is None:
        return torch.mm(a, b).to(dtype)
    if total.dtype == a.dtype:
        return total.addmm_(a, b)
    return total.add_(torch.mm(a, b))


def _add(total, value):
    """``total + value``, in place; ``value`` if ``total`` is None."""
    return value if total is None else total.add_(value)


class _Settings(NamedTuple):
    """The non-tensor arguments of :class:`_GeluMlpFunction`."""
    approximate: str  # the GELU's
    chunk: int  # rows computed at once
    product: Callable  # F.linear or onednn_matmul
    norm_eps: Optional[float]  # the LayerNorm's; None without a norm


def _forward(x, params, settings, keep_hidden):
    """The MLP on 2-D ``x`` in row chunks; returns the output and, with
    ``keep_hidden``, the GELU inputs of the chunks (else an empty list)."""
    weight1, bias1, weight2, bias2, norm_weight, norm_bias = params
    product = settings.product
    out = None if settings.chunk >= x.shape[0] else x.new_empty(
        x.shape[0], weight2.shape[0])
    hiddens = []
    for start in range(0, x.shape[0], settings.chunk):
        rows = x[start:start + settings.chunk]
        if settings.norm_eps is not None:
            rows = F.layer_norm(rows, rows.shape[-1:], norm_weight,
                                norm_bias, settings.norm_eps)
        hidden = product(rows, weight1, bias1)
        rows_out = product(
            F.gelu(hidden, approximate=settings.approximate), weight2, bias2)
        if out is None:
            out = rows_out
        else:
            out[start:start + settings.chunk] = rows_out
        if keep_hidden:
            hiddens.append(hidden)
    return out, hiddens


class _GeluMlpFunction(torch.autograd.Function):
    """``fc2(gelu(fc1(norm(x))))`` on 2-D inputs, keeping ``x`` and
    ``fc1(norm(x))``; no norm where ``settings.norm_eps`` is None."""

    @staticmethod
    def forward(ctx, x, weight1, bias1, weight2, bias2, norm_weight,
                norm_bias, settings):
        params = (weight1, bias1, weight2, bias2, norm_weight, norm_bias)
        out, hiddens = _forward(x, params, settings, True)
        ctx.save_for_backward(x, weight1, weight2, norm_weight, norm_bias,
                              *hiddens)
        ctx.settings = settings
        ctx.has_bias = (bias1 is not None, bias2 is not None)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, weight1, weight2, norm_weight, norm_bias, *hiddens = \
            ctx.saved_tensors
        settings = ctx.settings
        chunk, product = settings.chunk, settings.product
        needs = ctx.needs_input_grad
        needs_norm = any(needs[5:7])  # False for absent (None) params
        grads = [None] * 7  # x, weight1, bias1, weight2, bias2, norm's two
        # Sums over several chunks are kept in float32.
        sum_dtype = x.dtype if len(hiddens) == 1 else torch.promote_types(
            x.dtype, torch.float32)
        for index, hidden in enumerate(hiddens):
            rows = slice(index * chunk, (index + 1) * chunk)
            x_rows, grad_out_rows = x[rows], grad_out[rows]
            if needs[3]:
                activation = F.gelu(hidden, approximate=settings.approximate)
                grads[3] = _accumulate(grads[3], grad_out_rows.t(),
                                       activation, sum_dtype)
                del activation
            if not (any(needs[:3]) or needs_norm):
                continue
            grad_hidden = product(grad_out_rows, weight2.t())
            # Written over the gradient of the GELU's output (element-wise).
            torch.ops.aten.gelu_backward.grad_input(
                grad_hidden, hidden, approximate=settings.approximate,
                grad_input=grad_hidden)
            if needs[2] and ctx.has_bias[0]:
                grads[2] = _add(grads[2], grad_hidden.sum(0,
                                                          dtype=sum_dtype))
            normed = x_rows
            if settings.norm_eps is not None:
                # The norm's output is recomputed, not kept.
                normed, mean, rstd = torch.ops.aten.native_layer_norm(
                    x_rows, x_rows.shape[-1:], norm_weight, norm_bias,
                    settings.norm_eps)
            if needs[1]:
                grads[1] = _accumulate(grads[1], grad_hidden.t(), normed,
                                       sum_dtype)
            if not (needs[0] or needs_norm):
                continue
            grad_rows = product(grad_hidden, weight1.t())
            if settings.norm_eps is not None:
                grad_rows, grad_norm_weight, grad_norm_bias = \
                    torch.ops.aten.native_layer_norm_backward(
                        grad_rows, x_rows, x_rows.shape[-1:], mean, rstd,
                        norm_weight, norm_bias, [needs[0], needs[5], needs[6]])
                grads[5] = _add(grads[5], grad_norm_weight)
                grads[6] = _add(grads[6], grad_norm_bias)
            if needs[0]:
                if len(hiddens) == 1:
                    grads[0] = grad_rows
                else:
                    if grads[0] is None:
                        grads[0] = x.new_empty(x.shape)
                    grads[0][rows] = grad_rows
        if needs[4] and ctx.has_bias[1]:
            grads[4] = grad_out.sum(0)
        grads[1:4] = [
            g if g is None else g.to(w.dtype)
            for g, w in zip(grads[1:4], (weight1, weight1, weight2))
        ]
        return (*grads, None)


def _fusable_norm(norm, x):
    """Whether :func:`gelu_mlp` computes ``norm`` itself: a channel
    LayerNorm without autocast (with it the norm runs before the casts)."""
    return (isinstance(norm, nn.LayerNorm)
            and tuple(norm.normalized_shape) == (x.shape[-1], )
            and not torch.is_autocast_enabled(x.device.type))


def gelu_mlp(x, fc1, fc2, approximate='none', norm=None):
    """``fc2(gelu(fc1(norm(x))))``, keeping one hidden-width tensor for
    backward instead of two, in row chunks when the hidden tensor is large.

    A channel LayerNorm ``norm`` is computed inside and recomputed in
    backward; other norms are applied first. Products are those of
    :func:`mmtnt.accel.linear.linear`.

    Args:
        x (Tensor): Input of shape (..., in_features).
        fc1 (nn.Linear): The first layer.
        fc2 (nn.Linear): The second layer.
        approximate (str): The GELU's ``approximate``: 'none' or 'tanh'.
        norm (nn.Module, optional): A norm applied to ``x`` first.

    Examples:
        >>> fc1, fc2 = nn.Linear(8, 32), nn.Linear(32, 8)
        >>> norm = nn.LayerNorm(8)
        >>> x = torch.rand(2, 5, 8, requires_grad=True)
        >>> out = gelu_mlp(x, fc1, fc2, norm=norm)
        >>> plain = fc2(nn.functional.gelu(fc1(norm(x))))
        >>> torch.allclose(out, plain, atol=1e-6)
        True
    """
    norm_eps, norm_params = None, [None, None]
    if norm is not None:
        if _fusable_norm(norm, x):
            norm_eps, norm_params = norm.eps, [norm.weight, norm.bias]
        else:
            x = norm(x)
    params = [fc1.weight, fc1.bias, fc2.weight, fc2.bias]
    device_type = x.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        x = x.to(dtype)
        params = [p if p is None else p.to(dtype) for p in params]
    params += norm_params
    rows = x.reshape(-1, x.shape[-1])
    chunk = rows_per_chunk(rows.shape[0], fc1.out_features, x.element_size())
    with torch.autocast(device_type, enabled=False):
        product = onednn_matmul if uses_onednn(rows, params[0]) else F.linear
        settings = _Settings(approximate, chunk, product, norm_eps)
        if records_gradients(rows, *params):
            out = _GeluMlpFunction.apply(rows, *params, settings)
        else:
            out = _forward(rows, params, settings, False)[0]
    return out.view(*x.shape[:-1], out.shape[-1])
