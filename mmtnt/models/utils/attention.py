import torch.nn as nn
import torch.nn.functional as F


class MultiheadSelfAttention(nn.Module):
    """Multi-head self-attention with one fused query/key/value projection.

    The product ``softmax(q k^T / sqrt(d)) v`` runs through
    :func:`torch.nn.functional.scaled_dot_product_attention`, which picks the
    fastest kernel available for the device and dtype.

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
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x):
        """Attend over the tokens of ``x`` of shape (B, N, C)."""
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dims)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        x = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.attn_drop if self.training else 0.)
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))
