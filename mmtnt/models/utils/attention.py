import torch
import torch.nn as nn
import torch.nn.functional as F

from .onednn_linear import Linear
from .tracing import is_traced


def scaled_dot_product_attention(query, key, value, attn_mask=None,
                                 dropout_p=0.):
    """``softmax(query key^T / sqrt(d) + mask) value``, by the faster of two
    routes for the device, dtype and size.

    On the CPU, PyTorch's fused kernel (``F.scaled_dot_product_attention``)
    is slower than two matrix products and a softmax for bfloat16 and
    float16 inputs (2-5x for the forward plus backward pass of the TNT,
    PyramidTNT and Twins attentions, measured with one thread), and for
    float32 sequences of at most 64 keys (TNT's inner attention, the 49-key
    windows and sub-sampled keys of Twins and PyramidTNT: 1.0-2x for the
    forward plus backward pass on two threads), except in inference with
    more than 4 queries per key (the fused kernel's forward pass wins
    there). Those cases are computed explicitly; everywhere else (other
    devices, longer float32 sequences, tracing and compiling) the fused
    kernel runs.

    Args:
        query (Tensor): Shape (..., Nq, d).
        key (Tensor): Shape (..., Nk, d).
        value (Tensor): Shape (..., Nk, d_v).
        attn_mask (Tensor, optional): Boolean, True where a query may attend
            a key; broadcast to (..., Nq, Nk).
        dropout_p (float): Dropout rate on the attention weights.

    Returns:
        Tensor: Shape (..., Nq, d_v).

    Examples:
        >>> import torch
        >>> q, k, v = torch.rand(2, 4, 10, 8), torch.rand(2, 4, 6, 8), \
        ...     torch.rand(2, 4, 6, 8)
        >>> out = scaled_dot_product_attention(q.bfloat16(), k.bfloat16(),
        ...                                    v.bfloat16())
        >>> out.shape, out.dtype
        (torch.Size([2, 4, 10, 8]), torch.bfloat16)
    """
    if not _explicit_is_faster(query, key):
        return F.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p)
    attn = (query * query.shape[-1]**-0.5) @ key.transpose(-2, -1)
    if attn_mask is not None:
        attn = attn.masked_fill(~attn_mask, float('-inf'))
    if attn.dtype != torch.float32 and key.shape[-2] <= 16:
        # The CPU's low-precision softmax is slowest on short rows (4x
        # the float32 one on 16 keys, forward plus backward).
        attn = attn.softmax(dim=-1, dtype=torch.float32).to(value.dtype)
    else:
        attn = attn.softmax(dim=-1)
    if dropout_p > 0:
        attn = F.dropout(attn, dropout_p)
    return attn @ value


def _explicit_is_faster(query, key):
    if query.device.type != 'cpu' or is_traced():
        return False
    dtype = query.dtype
    if torch.is_autocast_enabled('cpu'):
        dtype = torch.get_autocast_dtype('cpu')
    if dtype in (torch.bfloat16, torch.float16):
        return True
    num_queries, num_keys = query.shape[-2], key.shape[-2]
    return num_keys <= 64 and (torch.is_grad_enabled()
                               or num_queries <= 4 * num_keys)


class MultiheadSelfAttention(nn.Module):
    """Multi-head self-attention with one fused query/key/value projection.

    The product ``softmax(q k^T / sqrt(d)) v`` runs through
    :func:`scaled_dot_product_attention`, which picks the faster route for
    the device and dtype.

    Args:
        embed_dims (int): Channels of the tokens.
        num_heads (int): Number of attention heads; must divide
            ``embed_dims``.
        qkv_bias (bool): Whether the query/key/value projection has a bias.
            Defaults to False.
        attn_drop (float): Dropout rate on the attention weights.
            Defaults to 0.
        proj_drop (float): Dropout rate after the output projection.
            Defaults to 0.

    Examples:
        >>> import torch
        >>> attn = MultiheadSelfAttention(embed_dims=64, num_heads=4)
        >>> attn(torch.rand(2, 10, 64)).shape
        torch.Size([2, 10, 64])
    """

    def __init__(self,
                 embed_dims,
                 num_heads,
                 qkv_bias=False,
                 attn_drop=0.,
                 proj_drop=0.):
        super().__init__()
        if embed_dims % num_heads != 0:
            raise ValueError(f'embed_dims ({embed_dims}) must be divisible '
                             f'by num_heads ({num_heads}).')
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.attn_drop = attn_drop
        self.qkv = Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x):
        """Attend over the tokens of ``x`` of shape (B, N, C)."""
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dims)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        x = scaled_dot_product_attention(
            q, k, v, dropout_p=self.attn_drop if self.training else 0.)
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))
