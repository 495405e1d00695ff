"""The attentions of TNT, PyramidTNT and Twins.

Each attention computes ``proj(attend(x, ...))``: :meth:`attend` projects
queries, keys and values, splits the heads and calls
:meth:`scaled_dot_product`, the one place the attention weights are formed.
It calls :func:`scaled_dot_product_attention`, which picks one of two
routes from the inputs' dtype and shape alone (never from the device):
:func:`torch.nn.functional.scaled_dot_product_attention`, or the explicit
products of :func:`explicit_attention` where no fused kernel takes the
shape (see :func:`takes_explicit_route`).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import build_norm_layer

from ..utils.shape import ceil_div, known_equal, pad_to_multiple
from .layout import map_to_tokens, tokens_to_map

#: Head dims the fused 16-bit kernels take without padding: PyTorch's cuDNN
#: and memory-efficient attention refuse 16-bit head dims that are not a
#: multiple of 8, and FlashAttention pads them to 8 and runs its head-dim-32
#: kernel (TNT's inner attention: head dim 6 or 10).
FUSED_HEAD_DIM_MULTIPLE = 8
#: The most batch entries, and heads, that the fused CUDA kernels take:
#: FlashAttention and the memory-efficient kernel launch one grid row per
#: batch entry and head, and a CUDA grid's second and third dimensions stop
#: at 65535 (PyramidTNT's word attention at batch 64: 65536 sentences).
#: docs/benchmarks.md ("Attention routes on a GPU") has the measurements.
MAX_FUSED_BATCH = 65535
LOW_PRECISION = (torch.float16, torch.bfloat16)


def attention_dtype(query):
    """The dtype the attention products of ``query`` run in: its own, or
    the autocast dtype where autocast would cast a float32 ``query``."""
    device_type = query.device.type
    if (query.dtype == torch.float32
            and torch.is_autocast_enabled(device_type)):
        return torch.get_autocast_dtype(device_type)
    return query.dtype


def exceeds_fused_grid(query):
    """Whether ``query`` (..., heads, N, d) has more batch entries or heads
    than :data:`MAX_FUSED_BATCH`. Not asked while ``torch.export`` traces
    the model: the exported graph runs elsewhere (ONNX Runtime), and the
    question would bound its dynamic batch."""
    if torch.compiler.is_exporting():
        return False
    *batch, heads = query.shape[:-2]
    return math.prod(batch) > MAX_FUSED_BATCH or heads > MAX_FUSED_BATCH


def takes_explicit_route(query, key, value):
    """Whether :func:`scaled_dot_product_attention` computes these inputs
    with :func:`explicit_attention`: 16-bit attention whose head dims are
    not multiples of :data:`FUSED_HEAD_DIM_MULTIPLE`, and attention over
    more than :data:`MAX_FUSED_BATCH` batch entries or heads. Everything
    else takes PyTorch's fused attention.

    Args:
        query (Tensor): Shape (..., heads, Nq, d).
        key (Tensor): Shape (..., heads, Nk, d).
        value (Tensor): Shape (..., heads, Nk, d_v).

    Returns:
        bool: Whether the explicit route runs.

    Examples:
        >>> import torch
        >>> q = torch.rand(2, 4, 16, 6, dtype=torch.bfloat16)
        >>> takes_explicit_route(q, q, q), takes_explicit_route(
        ...     q.float(), q.float(), q.float())
        (True, False)
    """
    if exceeds_fused_grid(query):
        return True
    if attention_dtype(query) not in LOW_PRECISION:
        return False
    return (query.shape[-1] % FUSED_HEAD_DIM_MULTIPLE != 0
            or value.shape[-1] % FUSED_HEAD_DIM_MULTIPLE != 0)


def explicit_attention(query,
                       key,
                       value,
                       attn_mask=None,
                       dropout_p=0.,
                       float32_softmax=True):
    """``softmax(query key^T / sqrt(d) + attn_mask) value`` as two matrix
    products and a softmax.

    Args:
        query (Tensor): Shape (..., Nq, d).
        key (Tensor): Shape (..., Nk, d).
        value (Tensor): Shape (..., Nk, d_v).
        attn_mask (Tensor, optional): A float bias added to the logits, or
            a boolean mask, True where a query may attend a key; broadcast
            to (..., Nq, Nk).
        dropout_p (float): Dropout rate on the attention weights.
        float32_softmax (bool): Whether 16-bit logits are normalised in
            float32 (then cast back). Defaults to True.

    Returns:
        Tensor: Shape (..., Nq, d_v).

    Examples:
        >>> import torch
        >>> q = torch.rand(2, 4, 16, 6)
        >>> explicit_attention(q, q, q).shape
        torch.Size([2, 4, 16, 6])
    """
    scale = query.shape[-1]**-0.5
    if attn_mask is not None and attn_mask.is_floating_point():
        # bias + scale * q k^T in one pass.
        attn = torch.add(
            attn_mask, query @ key.transpose(-2, -1), alpha=scale)
    else:
        attn = (query * scale) @ key.transpose(-2, -1)
        if attn_mask is not None:
            attn = attn.masked_fill(~attn_mask, float('-inf'))
    softmax_dtype = torch.float32 if float32_softmax else None
    attn = attn.softmax(dim=-1, dtype=softmax_dtype).to(value.dtype)
    if dropout_p > 0:
        attn = F.dropout(attn, dropout_p)
    return attn @ value


def scaled_dot_product_attention(query, key, value, attn_mask=None,
                                 dropout_p=0.):
    """:func:`torch.nn.functional.scaled_dot_product_attention`, or
    :func:`explicit_attention` where :func:`takes_explicit_route` says so.

    Args:
        query (Tensor): Shape (..., Nq, d).
        key (Tensor): Shape (..., Nk, d).
        value (Tensor): Shape (..., Nk, d_v).
        attn_mask (Tensor, optional): A float bias added to the logits, or
            a boolean mask, True where a query may attend a key.
        dropout_p (float): Dropout rate on the attention weights.

    Returns:
        Tensor: Shape (..., Nq, d_v).

    Examples:
        >>> import torch
        >>> q = torch.rand(2, 4, 49, 32)
        >>> scaled_dot_product_attention(q, q, q).shape
        torch.Size([2, 4, 49, 32])
    """
    if takes_explicit_route(query, key, value):
        return explicit_attention(query, key, value, attn_mask, dropout_p)
    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p)


def check_heads(embed_dims, num_heads):
    """Raise a ValueError unless ``num_heads`` divides ``embed_dims``."""
    if num_heads < 1 or embed_dims % num_heads != 0:
        raise ValueError(f'embed_dims ({embed_dims}) must be divisible by '
                         f'num_heads ({num_heads}).')


def split_heads(x, num_parts, num_heads):
    """Split projected tokens (B, N, num_parts * C) into ``num_parts``
    tensors of shape (B, num_heads, N, C // num_heads)."""
    x = x.unflatten(-1, (num_parts, num_heads, -1))
    return x.permute(2, 0, 3, 1, 4).unbind(0)


def merge_heads(x):
    """Join heads (B, num_heads, N, d) into tokens (B, N, num_heads * d).

    While ``torch.export`` traces the model (ONNX export), several heads are
    copied explicitly: the traced attention output has the memory layout
    of a kernel that returns (B, N, heads, d), so the flatten would be
    recorded as a view, and the ONNX exporter's decomposition of the
    attention does not keep that layout (without the copy, PyramidTNT's
    exported graph disagrees with PyTorch). Otherwise the flatten is a view
    where the kernel's layout allows it, else a copy."""
    x = x.transpose(1, 2)
    if torch.compiler.is_exporting() and x.shape[2] > 1:
        x = x.clone(memory_format=torch.contiguous_format)
    return x.flatten(2)


class MultiheadAttention(nn.Module):
    """Multi-head self-attention with one query/key/value projection.

    Args:
        embed_dims (int): Channels of the tokens.
        num_heads (int): Attention heads; must divide ``embed_dims``.
        qkv_bias (bool): Whether the query/key/value projection has a bias.
            Defaults to False.
        attn_drop (float): Dropout rate on the attention weights.
            Defaults to 0.
        proj_drop (float): Dropout rate after the output projection.
            Defaults to 0.

    Examples:
        >>> import torch
        >>> attn = MultiheadAttention(embed_dims=64, num_heads=4)
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
        check_heads(embed_dims, num_heads)
        self.num_heads = num_heads
        self.attn_drop = attn_drop
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, hw_shape=None, attn_bias=None):
        """``proj(attend(x, hw_shape, attn_bias))``, then dropout.

        Args:
            x (Tensor): Tokens (B, N, C).
            hw_shape (tuple[int, int], optional): Their grid (H, W), for
                the attentions that read the token map (not used here).
            attn_bias (Tensor, optional): Added to the attention logits.

        Returns:
            Tensor: Tokens (B, N, C).
        """
        return self.proj_drop(self.proj(self.attend(x, hw_shape, attn_bias)))

    def attend(self, x, hw_shape=None, attn_bias=None):
        """Attention over the tokens ``x`` (B, N, C), before the output
        projection; ``attn_bias`` (broadcast to (B, heads, N, N)) is added
        to the logits. ``hw_shape`` is not needed."""
        q, k, v = split_heads(self.qkv(x), 3, self.num_heads)
        return merge_heads(self.scaled_dot_product(q, k, v, attn_bias))

    def scaled_dot_product(self, query, key, value, attn_mask=None):
        """``softmax(query key^T / sqrt(d) + attn_mask) value``, with
        dropout on the weights while training, by the route of
        :func:`scaled_dot_product_attention`.

        Args:
            query (Tensor): Shape (B, heads, Nq, d).
            key (Tensor): Shape (B, heads, Nk, d).
            value (Tensor): Shape (B, heads, Nk, d).
            attn_mask (Tensor, optional): A float bias added to the logits,
                or a boolean mask, True where a query may attend a key.

        Returns:
            Tensor: Shape (B, heads, Nq, d).
        """
        return scaled_dot_product_attention(
            query,
            key,
            value,
            attn_mask=attn_mask,
            dropout_p=self.attn_drop if self.training else 0.)


class SpatialReductionAttention(MultiheadAttention):
    """Attention whose keys and values come from a spatially reduced copy
    of the token map: Twins' global sub-sampled attention (GSA) and
    PyramidTNT's spatial-reduction attention (SRA).

    The map is reduced by ``sr_ratio`` in both directions, then normalised:

    - ``reduction='conv'`` (Twins): a ``sr_ratio`` x ``sr_ratio`` convolution
      of the same stride, ``sr``;
    - ``reduction='pool'`` (PyramidTNT): average pooling over
      ``sr_ratio`` x ``sr_ratio`` windows, then a linear layer, ``sr_proj``.

    Either way the last ``H % sr_ratio`` rows and ``W % sr_ratio`` columns
    do not reach the keys and values (the official models' behaviour);
    queries cover every token. With ``sr_ratio=1`` there is no reduction and
    this is :class:`MultiheadAttention`, with its fused ``qkv`` projection.

    Args:
        embed_dims (int): Channels of the tokens.
        num_heads (int): Attention heads; must divide ``embed_dims``.
        sr_ratio (int): Spatial reduction of keys and values. Defaults to 1.
        reduction (str): ``'conv'`` or ``'pool'``. Defaults to ``'conv'``.
        qkv_bias (bool): Whether the query/key/value projections have a bias.
            Defaults to False.
        attn_drop (float): Dropout rate on the attention weights.
            Defaults to 0.
        proj_drop (float): Dropout rate after the output projection.
            Defaults to 0.
        norm_cfg (dict): The norm after the reduction. Defaults to
            ``dict(type='LN')``.

    Examples:
        >>> import torch
        >>> attn = SpatialReductionAttention(64, 2, sr_ratio=4)
        >>> attn(torch.rand(2, 15 * 17, 64), (15, 17)).shape
        torch.Size([2, 255, 64])
        >>> attn = SpatialReductionAttention(64, 4, sr_ratio=2,
        ...                                  reduction='pool')
        >>> bias = torch.zeros(1, 4, 6 * 8, 3 * 4, requires_grad=True)
        >>> attn(torch.rand(2, 6 * 8, 64), (6, 8), bias).shape
        torch.Size([2, 48, 64])
    """
    reductions = ('conv', 'pool')

    def __init__(self,
                 embed_dims,
                 num_heads,
                 sr_ratio=1,
                 reduction='conv',
                 qkv_bias=False,
                 attn_drop=0.,
                 proj_drop=0.,
                 norm_cfg=dict(type='LN')):
        super().__init__(embed_dims, num_heads, qkv_bias, attn_drop,
                         proj_drop)
        if reduction not in self.reductions:
            raise ValueError(f'Unknown reduction {reduction!r}: choose one '
                             f'of {self.reductions}.')
        if sr_ratio < 1:
            raise ValueError(f'sr_ratio must be positive, got {sr_ratio}.')
        self.sr_ratio = sr_ratio
        self.reduction = reduction
        if sr_ratio == 1:
            return
        del self.qkv  # queries, and keys and values, are projected apart
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        if reduction == 'conv':
            self.sr = nn.Conv2d(
                embed_dims, embed_dims, kernel_size=sr_ratio,
                stride=sr_ratio)
        else:
            self.sr_proj = nn.Linear(embed_dims, embed_dims)
        self.sr_norm = build_norm_layer(norm_cfg, embed_dims)[1]
        self.kv = nn.Linear(embed_dims, embed_dims * 2, bias=qkv_bias)

    def reduce(self, x, hw_shape):
        """The reduced tokens (B, (H // sr) * (W // sr), C) of tokens ``x``
        on a grid ``hw_shape`` (H, W), normalised."""
        fmap = tokens_to_map(x, hw_shape)
        if self.reduction == 'conv':
            return self.sr_norm(map_to_tokens(self.sr(fmap)))
        pooled = F.avg_pool2d(fmap, self.sr_ratio)
        return self.sr_norm(self.sr_proj(map_to_tokens(pooled)))

    def attend(self, x, hw_shape=None, attn_bias=None):
        """Attention over tokens ``x`` (B, H*W, C) on a grid ``hw_shape``,
        before the output projection; ``attn_bias`` (broadcast to
        (B, heads, H*W, (H // sr) * (W // sr))) is added to the logits."""
        if self.sr_ratio == 1:
            return super().attend(x, hw_shape, attn_bias)
        q, = split_heads(self.q(x), 1, self.num_heads)
        k, v = split_heads(self.kv(self.reduce(x, hw_shape)), 2,
                           self.num_heads)
        return merge_heads(self.scaled_dot_product(q, k, v, attn_bias))


class LocallyGroupedAttention(MultiheadAttention):
    """Locally-grouped self-attention (LSA) of Twins-SVT: attention within
    each ``window_size`` x ``window_size`` window.

    A map whose sides are not multiples of ``window_size`` is padded at the
    right and bottom; padded tokens are masked out as keys, so every real
    token attends to exactly the real tokens of its window, whichever of the
    two pads is zero. (The official classification code does not mask, and
    the masks of mmpretrain and mmseg vanish when one of the pads is zero.)

    Args:
        embed_dims (int): Channels of the tokens.
        num_heads (int): Attention heads; must divide ``embed_dims``.
        window_size (int): Side of a window. Defaults to 7.
        qkv_bias (bool): Whether the query/key/value projection has a bias.
            Defaults to False.
        attn_drop (float): Dropout rate on the attention weights.
            Defaults to 0.
        proj_drop (float): Dropout rate after the output projection.
            Defaults to 0.

    Examples:
        >>> import torch
        >>> attn = LocallyGroupedAttention(64, 2, window_size=7)
        >>> attn(torch.rand(2, 15 * 17, 64), (15, 17)).shape
        torch.Size([2, 255, 64])
    """

    def __init__(self,
                 embed_dims,
                 num_heads,
                 window_size=7,
                 qkv_bias=False,
                 attn_drop=0.,
                 proj_drop=0.):
        super().__init__(embed_dims, num_heads, qkv_bias, attn_drop,
                         proj_drop)
        if window_size < 1:
            raise ValueError(f'window_size must be positive, got '
                             f'{window_size}.')
        self.window_size = window_size

    @staticmethod
    def padding_mask(hw_shape, window_size, device=None):
        """Which keys of each window are real tokens.

        Args:
            hw_shape (tuple[int, int]): The map (H, W) before padding.
            window_size (int): Side of a window.
            device (torch.device, optional): Where to build the mask.

        Returns:
            Tensor: Boolean (num_windows, 1, 1, window_size**2), True for real
            tokens, windows in row-major order.
        """
        H, W = hw_shape
        ws = window_size
        nh, nw = ceil_div(H, ws), ceil_div(W, ws)
        rows = torch.arange(nh * ws, device=device) < H
        cols = torch.arange(nw * ws, device=device) < W
        real = rows[:, None] & cols[None, :]
        real = real.view(nh, ws, nw, ws).transpose(1, 2)
        return real.reshape(nh * nw, 1, 1, ws * ws)

    def attend(self, x, hw_shape=None, attn_bias=None):
        """Attention within the windows of tokens ``x`` (B, H*W, C) on a
        grid ``hw_shape`` (H, W), before the output projection. Windows
        take no ``attn_bias``."""
        if attn_bias is not None:
            raise ValueError('LocallyGroupedAttention takes no attn_bias.')
        B, N, C = x.shape
        H, W = hw_shape
        ws = self.window_size
        x = pad_to_multiple(x.view(B, H, W, C), ws, dims=(1, 2))
        nh, nw = x.shape[1] // ws, x.shape[2] // ws
        padded = not known_equal(x.shape[1:3], (H, W))
        # (B * windows, ws * ws, C), windows in row-major order.
        windows = x.view(B, nh, ws, nw, ws, C).transpose(2, 3).reshape(
            B * nh * nw, ws * ws, C)
        q, k, v = split_heads(self.qkv(windows), 3, self.num_heads)
        mask = None
        if padded:
            mask = self.padding_mask(hw_shape, ws, x.device).repeat(
                B, 1, 1, 1)
        windows = merge_heads(self.scaled_dot_product(q, k, v, mask))
        windows = windows.view(B, nh, nw, ws, ws, C)
        x = windows.transpose(2, 3).reshape(B, nh * ws, nw * ws, C)
        if padded:
            x = x[:, :H, :W]
        # The output projection then skips the padded tokens.
        return x.reshape(B, N, C)
