"""Attention on the CPU: explicit products where PyTorch's fused kernel is
slower.

The CPU versions of mmtnt's attention modules differ from the plain ones
in their ``'auto'`` implementation only (their ``auto_attention``): on the
CPU, :func:`scaled_dot_product_attention` computes two matrix products and
a softmax for bfloat16 and float16 inputs, for float32 sequences of a few
keys in training, and with a float bias on the logits; everywhere else the
fused kernel runs. A model set to another ``attn_impl``
(:func:`mmtnt.models.set_attention_impl`) computes that one. The
thresholds below were chosen by timing both routes (docs/benchmarks.md,
"Where the accelerator's thresholds come from").
"""
import torch
import torch.nn.functional as F

from ..models.layers import (LocallyGroupedAttention, MultiheadAttention,
                             SpatialReductionAttention)
from ..models.layers.attention import (LOW_PRECISION, attention_dtype,
                                       explicit_attention)
from .tracing import is_traced

#: Float32 sequences of at most this many keys are computed explicitly in
#: training.
MAX_EXPLICIT_KEYS = 64
#: Low-precision softmax over at most this many keys runs in float32.
MAX_LOW_PRECISION_SOFTMAX_KEYS = 16


def scaled_dot_product_attention(query, key, value, attn_mask=None,
                                 dropout_p=0.):
    """:func:`torch.nn.functional.scaled_dot_product_attention`, or the
    plain model's explicit products
    (:func:`mmtnt.models.layers.attention.explicit_attention`), whichever
    is faster on the CPU for the dtype and size.

    Args:
        query (Tensor): Shape (..., Nq, d).
        key (Tensor): Shape (..., Nk, d).
        value (Tensor): Shape (..., Nk, d_v).
        attn_mask (Tensor, optional): A float bias added to the logits, or a
            boolean mask, True where a query may attend a key; broadcast to
            (..., Nq, Nk).
        dropout_p (float): Dropout rate on the attention weights.

    Returns:
        Tensor: Shape (..., Nq, d_v).

    Examples:
        >>> import torch
        >>> q, k, v = torch.rand(2, 4, 10, 8), torch.rand(2, 4, 6, 8), \\
        ...     torch.rand(2, 4, 6, 8)
        >>> out = scaled_dot_product_attention(q.bfloat16(), k.bfloat16(),
        ...                                    v.bfloat16())
        >>> out.shape, out.dtype
        (torch.Size([2, 4, 10, 8]), torch.bfloat16)
    """
    if not explicit_is_faster(query, key, attn_mask):
        return F.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p)
    return explicit_attention(
        query,
        key,
        value,
        attn_mask,
        dropout_p,
        float32_softmax=key.shape[-2] <= MAX_LOW_PRECISION_SOFTMAX_KEYS)


def explicit_is_faster(query, key, attn_mask=None):
    """Whether :func:`scaled_dot_product_attention` computes these inputs
    explicitly: on the CPU outside tracers, for low precision, a float
    bias, or float32 sequences of at most :data:`MAX_EXPLICIT_KEYS` keys in
    training (with gradients enabled)."""
    if query.device.type != 'cpu' or is_traced():
        return False
    if attention_dtype(query) in LOW_PRECISION:
        return True
    if attn_mask is not None and attn_mask.is_floating_point():
        return True
    return torch.is_grad_enabled() and key.shape[-2] <= MAX_EXPLICIT_KEYS


class CpuMultiheadAttention(MultiheadAttention):
    """:class:`MultiheadAttention` with the CPU's ``'auto'`` route."""
    auto_attention = staticmethod(scaled_dot_product_attention)


class CpuSpatialReductionAttention(SpatialReductionAttention):
    """:class:`SpatialReductionAttention` with the CPU's ``'auto'`` route."""
    auto_attention = staticmethod(scaled_dot_product_attention)


class CpuLocallyGroupedAttention(LocallyGroupedAttention):
    """:class:`LocallyGroupedAttention` with the CPU's ``'auto'`` route."""
    auto_attention = staticmethod(scaled_dot_product_attention)
