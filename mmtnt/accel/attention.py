"""Attention on the CPU: explicit products where PyTorch's fused kernel is
slower (docs/benchmarks.md); only the ``'auto'`` implementation differs."""
import torch
import torch.nn.functional as F

from ..models.layers import (LocallyGroupedAttention, MultiheadAttention,
                             SpatialReductionAttention)
from ..models.layers.attention import (LOW_PRECISION, attention_dtype,
                                       explicit_attention)
from .linear import is_traced

#: Float32 training attention over at most this many keys is explicit.
MAX_EXPLICIT_KEYS = 64
#: Low-precision softmax over at most this many keys runs in float32.
MAX_LOW_PRECISION_SOFTMAX_KEYS = 16


def scaled_dot_product_attention(query, key, value, attn_mask=None,
                                 dropout_p=0.):
    """PyTorch's fused attention or
    :func:`mmtnt.models.layers.attention.explicit_attention`, whichever is
    faster on the CPU for the dtype and size; takes and returns what
    :func:`~mmtnt.models.layers.attention.explicit_attention` does."""
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
    """Whether :func:`scaled_dot_product_attention` is explicit: on the CPU
    outside tracers, for low precision, a float bias, or float32 with
    gradients over at most :data:`MAX_EXPLICIT_KEYS` keys."""
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
