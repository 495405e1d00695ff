"""The attentions of TNT, PyramidTNT and Twins, and the functions that
compute their weights, by the implementation each module's ``attn_impl``
names (:data:`ATTENTION_IMPLS`, :func:`set_attention_impl`)."""
import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import build_norm_layer
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..utils.shape import ceil_div, known_zero, pad_to_multiple
from .layout import map_to_tokens, tokens_to_map

#: Head dims the fused 16-bit kernels take without padding.
FUSED_HEAD_DIM_MULTIPLE = 8
#: The most batch entries, and heads, the fused CUDA kernels take.
MAX_FUSED_BATCH = 65535
LOW_PRECISION = (torch.float16, torch.bfloat16)
#: The parts that :func:`parts_attention` cuts the queries into.
ATTENTION_QUERY_CHUNKS = 16
#: Attention with fewer weights (queries x keys) is not cut into parts.
MIN_CHUNKED_WEIGHTS = 2**20


def attention_dtype(query):
    """The dtype attention on ``query`` runs in, autocast included."""
    device_type = query.device.type
    if (query.dtype == torch.float32
            and torch.is_autocast_enabled(device_type)):
        return torch.get_autocast_dtype(device_type)
    return query.dtype


def exceeds_fused_grid(query):
    """Whether ``query`` has more batch entries or heads than
    :data:`MAX_FUSED_BATCH` (never while exporting: it would bound the
    graph's batch)."""
    if torch.compiler.is_exporting():
        return False
    *batch, heads = query.shape[:-2]
    return math.prod(batch) > MAX_FUSED_BATCH or heads > MAX_FUSED_BATCH


def takes_explicit_route(query, key, value):
    """Whether :func:`scaled_dot_product_attention` takes
    :func:`explicit_attention`: 16-bit head dims the fused kernels don't
    take, or too many batch entries or heads for them.

    Examples:
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
        attn_mask (Tensor, optional): A float bias on the logits, or a
            boolean mask (True: may attend); broadcast to (..., Nq, Nk).
        dropout_p (float): Dropout rate on the attention weights.
        float32_softmax (bool): Softmax 16-bit logits in float32.
            Defaults to True.

    Returns:
        Tensor: Shape (..., Nq, d_v).

    Examples:
        >>> q = torch.rand(2, 4, 16, 6)
        >>> explicit_attention(q, q, q).shape
        torch.Size([2, 4, 16, 6])
    """
    scale = query.shape[-1]**-0.5
    if attn_mask is not None and attn_mask.is_floating_point():
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
    """The ``'auto'`` implementation: PyTorch's fused attention, or
    :func:`explicit_attention` where :func:`takes_explicit_route` says so.
    Takes and returns what :func:`explicit_attention` does.
    """
    if takes_explicit_route(query, key, value):
        return explicit_attention(query, key, value, attn_mask, dropout_p)
    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p)


def cuts_queries(query, key):
    """Whether :func:`parts_attention` cuts the queries: unless their
    weights are known to be fewer than :data:`MIN_CHUNKED_WEIGHTS` (so
    windows and sentences stay whole in a dynamic export).

    Examples:
        >>> q, k = torch.rand(8, 4, 49, 32), torch.rand(8, 4, 49, 32)
        >>> cuts_queries(q, k), cuts_queries(torch.rand(1, 4, 4200, 32),
        ...                                  torch.rand(1, 4, 1050, 32))
        (False, True)
    """
    return not statically_known_true(
        query.shape[-2] * key.shape[-2] < MIN_CHUNKED_WEIGHTS)


def part_bounds(num_queries, chunks):
    """The ``chunks + 1`` bounds of the parts of the queries."""
    return [part * num_queries // chunks for part in range(chunks + 1)]


@torch.library.custom_op('mmtnt::attention_in_parts', mutates_args=())
def attention_in_parts(query: torch.Tensor, key: torch.Tensor,
                       value: torch.Tensor, attn_mask: Optional[torch.Tensor],
                       chunks: int, split_mask: bool) -> torch.Tensor:
    """:func:`explicit_attention` over ``chunks`` parts of the queries in
    turn; ``split_mask``: whether ``attn_mask`` has a row per query. One
    operator for ``torch.export``, written out by ``mmtnt.deploy``."""
    outputs = []
    bounds = part_bounds(query.shape[-2], chunks)
    for start, end in zip(bounds[:-1], bounds[1:]):
        mask = attn_mask[..., start:end, :] if split_mask else attn_mask
        outputs.append(
            explicit_attention(query[..., start:end, :], key, value, mask))
    return torch.cat(outputs, dim=-2)


@attention_in_parts.register_fake
def _(query, key, value, attn_mask, chunks, split_mask):
    """The output's shape and dtype, for tracing."""
    return query.new_empty(*query.shape[:-1], value.shape[-1])


def parts_attention(query,
                    key,
                    value,
                    attn_mask=None,
                    dropout_p=0.,
                    chunks=ATTENTION_QUERY_CHUNKS):
    """The ``'parts'`` implementation: :func:`explicit_attention` over
    ``chunks`` parts of the queries in turn where :func:`cuts_queries` says
    so, else whole. Same result; an exported graph holds one part's
    weights at a time.

    Args:
        query, key, value, attn_mask, dropout_p: As
            :func:`explicit_attention` takes them; with dropout the
            attention stays whole.
        chunks (int): The parts. Defaults to
            :data:`ATTENTION_QUERY_CHUNKS`.

    Examples:
        >>> q, k = torch.rand(1, 4, 4200, 8), torch.rand(1, 4, 1050, 8)
        >>> torch.allclose(parts_attention(q, k, k),
        ...                explicit_attention(q, k, k), atol=1e-6)
        True
    """
    if dropout_p > 0 or not cuts_queries(query, key):
        return explicit_attention(query, key, value, attn_mask, dropout_p)
    split_mask = attn_mask is not None and not statically_known_true(
        attn_mask.shape[-2] == 1)
    return attention_in_parts(query, key, value, attn_mask, chunks,
                              split_mask)


#: The ``attn_impl`` values (:func:`set_attention_impl`).
ATTENTION_IMPLS = ('auto', 'explicit', 'parts')


def set_attention_impl(model, impl):
    """Set the ``attn_impl`` of every :class:`MultiheadAttention` (and
    subclass) in ``model``.

    Args:
        model (nn.Module): Changed in place, and returned.
        impl (str): One of :data:`ATTENTION_IMPLS`: ``'auto'`` (fused or
            explicit by dtype and shape), ``'explicit'`` (the explicit
            products) or ``'parts'`` (explicit, queries in parts where the
            weights may be many). Else a ValueError.

    Examples:
        >>> from mmtnt.models import SVT, set_attention_impl
        >>> model = set_attention_impl(SVT(arch='s'), 'explicit')
        >>> model.stages[0].blocks[0].attn.attn_impl
        'explicit'
    """
    if impl not in ATTENTION_IMPLS:
        raise ValueError(f'Unknown attention implementation {impl!r}: '
                         f'choose one of {ATTENTION_IMPLS}.')
    for module in model.modules():
        if isinstance(module, MultiheadAttention):
            module.attn_impl = impl
    return model


def check_heads(embed_dims, num_heads):
    """Raise a ValueError unless ``num_heads`` divides ``embed_dims``."""
    if num_heads < 1 or embed_dims % num_heads != 0:
        raise ValueError(f'embed_dims ({embed_dims}) must be divisible by '
                         f'num_heads ({num_heads}).')


def split_heads(x, num_parts, num_heads):
    """Split (B, N, num_parts * C) into ``num_parts`` tensors
    (B, num_heads, N, C // num_heads)."""
    x = x.unflatten(-1, (num_parts, num_heads, -1))
    return x.permute(2, 0, 3, 1, 4).unbind(0)


def merge_heads(x):
    """Join heads (B, num_heads, N, d) into tokens (B, N, num_heads * d);
    copied while exporting, as the ONNX exporter would mistake the view."""
    x = x.transpose(1, 2)
    if torch.compiler.is_exporting() and x.shape[2] > 1:
        x = x.clone(memory_format=torch.contiguous_format)
    return x.flatten(2)


def batch_index(index, batch_size, stride):
    """``index`` (N,) into each of ``batch_size`` rows of ``stride``
    elements, as one index (batch_size * N,) into the rows laid end to end."""
    offsets = torch.arange(batch_size, device=index.device) * stride
    return (offsets[:, None] + index).flatten()


class MultiheadAttention(nn.Module):
    """Multi-head self-attention with one query/key/value projection.

    Args:
        embed_dims (int): Channels of the tokens.
        num_heads (int): Attention heads; must divide ``embed_dims``.
        qkv_bias (bool): Query/key/value projection bias. Defaults to False.
        attn_drop (float): Dropout on attention weights. Defaults to 0.
        proj_drop (float): Dropout after the output projection. Default: 0.

    Examples:
        >>> attn = MultiheadAttention(embed_dims=64, num_heads=4)
        >>> attn(torch.rand(2, 10, 64)).shape
        torch.Size([2, 10, 64])
    """
    #: One of :data:`ATTENTION_IMPLS` (:func:`set_attention_impl`).
    attn_impl = 'auto'
    auto_attention = staticmethod(scaled_dot_product_attention)

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
        """Tokens (B, N, C) -> (B, N, C); ``hw_shape`` (H, W) is for the
        attentions that read the token map, ``attn_bias`` is added to the
        logits."""
        return self.proj_drop(self.proj(self.attend(x, hw_shape, attn_bias)))

    def attend(self, x, hw_shape=None, attn_bias=None):
        """Attention over ``x`` (B, N, C), before the output projection."""
        q, k, v = split_heads(self.qkv(x), 3, self.num_heads)
        return merge_heads(self.scaled_dot_product(q, k, v, attn_bias))

    def scaled_dot_product(self, query, key, value, attn_mask=None):
        """The attention of :func:`explicit_attention`'s arguments by
        ``attn_impl``, with dropout while training."""
        attention = {
            'auto': self.auto_attention,
            'explicit': explicit_attention,
            'parts': parts_attention,
        }[self.attn_impl]
        return attention(
            query,
            key,
            value,
            attn_mask,
            dropout_p=self.attn_drop if self.training else 0.)


class SpatialReductionAttention(MultiheadAttention):
    """Attention whose keys and values come from a spatially reduced token
    map: Twins' GSA (``reduction='conv'``, a strided convolution) and
    PyramidTNT's SRA (``'pool'``, average pooling and a linear layer).
    Rows and columns past a multiple of ``sr_ratio`` reach only the queries,
    as in the official models.

    Args:
        sr_ratio (int): Spatial reduction of keys and values; 1 is
            :class:`MultiheadAttention`. Defaults to 1.
        reduction (str): ``'conv'`` or ``'pool'``. Defaults to ``'conv'``.
        norm_cfg (dict): The norm after the reduction. Defaults to
            ``dict(type='LN')``.
        embed_dims, num_heads, **kwargs: As :class:`MultiheadAttention`
            takes them.

    Examples:
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
                 norm_cfg=dict(type='LN'),
                 **kwargs):
        super().__init__(embed_dims, num_heads, **kwargs)
        if reduction not in self.reductions:
            raise ValueError(f'Unknown reduction {reduction!r}: choose one '
                             f'of {self.reductions}.')
        if sr_ratio < 1:
            raise ValueError(f'sr_ratio must be positive, got {sr_ratio}.')
        self.sr_ratio = sr_ratio
        self.reduction = reduction
        if sr_ratio == 1:
            return
        qkv_bias = self.qkv.bias is not None
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
        """The reduced, normalised tokens of ``x`` on a grid ``hw_shape``."""
        fmap = tokens_to_map(x, hw_shape)
        if self.reduction == 'conv':
            return self.sr_norm(map_to_tokens(self.sr(fmap)))
        pooled = F.avg_pool2d(fmap, self.sr_ratio)
        return self.sr_norm(self.sr_proj(map_to_tokens(pooled)))

    def attend(self, x, hw_shape=None, attn_bias=None):
        """Attention over ``x`` (B, H*W, C), before the output projection."""
        if self.sr_ratio == 1:
            return super().attend(x, hw_shape, attn_bias)
        q, = split_heads(self.q(x), 1, self.num_heads)
        k, v = split_heads(self.kv(self.reduce(x, hw_shape)), 2,
                           self.num_heads)
        return merge_heads(self.scaled_dot_product(q, k, v, attn_bias))


class LocallyGroupedAttention(MultiheadAttention):
    """Locally-grouped self-attention (LSA) of Twins-SVT: attention within
    ``window_size`` x ``window_size`` windows. The map is padded at the
    right and bottom, and padded keys are masked out.

    Args:
        window_size (int): Side of a window. Defaults to 7.
        embed_dims, num_heads, **kwargs: As :class:`MultiheadAttention`
            takes them.

    Examples:
        >>> attn = LocallyGroupedAttention(32, 2, window_size=4)
        >>> attn(torch.rand(1, 9 * 10, 32), (9, 10)).shape
        torch.Size([1, 90, 32])
    """

    def __init__(self, embed_dims, num_heads, window_size=7, **kwargs):
        super().__init__(embed_dims, num_heads, **kwargs)
        if window_size < 1:
            raise ValueError(f'window_size must be positive, got '
                             f'{window_size}.')
        self.window_size = window_size

    @staticmethod
    def window_positions(num_windows, window_size, device=None):
        """Where the tokens of the windows lie on the padded map: rows and
        columns (each int64 (nh*nw*ws*ws,)) of every window's tokens in
        turn, windows and their tokens row-major.

        Args:
            num_windows (tuple[int, int]): The windows (nh, nw) a column
                and a row.
            window_size (int): Side ``ws`` of a window.
            device (torch.device, optional): Where the tensors go.

        Returns:
            tuple[Tensor, Tensor]: The rows and the columns.

        Examples:
            >>> rows, cols = LocallyGroupedAttention.window_positions(
            ...     (1, 2), 2)
            >>> rows.tolist(), cols.tolist()
            ([0, 0, 1, 1, 0, 0, 1, 1], [0, 1, 0, 1, 2, 3, 2, 3])
        """
        nh, nw = num_windows
        ws = window_size
        position = torch.arange(nh * nw * ws * ws, device=device)
        window, offset = position // (ws * ws), position % (ws * ws)
        # No remainder by a size: ONNX export takes none.
        window_row = window // nw
        rows = window_row * ws + offset // ws
        cols = (window - window_row * nw) * ws + offset % ws
        return rows, cols

    @classmethod
    def padding_mask(cls, hw_shape, window_size, device=None):
        """Which keys of each padded window are real tokens: boolean
        (num_windows, 1, 1, window_size**2), windows row-major."""
        H, W = hw_shape
        ws = window_size
        nh, nw = ceil_div(H, ws), ceil_div(W, ws)
        rows, cols = cls.window_positions((nh, nw), ws, device)
        return ((rows < H) & (cols < W)).view(nh * nw, 1, 1, ws * ws)

    def partition(self, x, hw_shape):
        """The windows (B*nh*nw, ws*ws, C) of tokens ``x`` (B, H*W, C) on
        a grid ``hw_shape``, zero-padded at the right and bottom."""
        B, _, C = x.shape
        H, W = hw_shape
        ws = self.window_size
        x = pad_to_multiple(x.view(B, H, W, C), ws, dims=(1, 2))
        Hp, Wp = x.shape[1:3]
        rows, cols = self.window_positions((Hp // ws, Wp // ws), ws,
                                           x.device)
        index = batch_index(rows * Wp + cols, B, Hp * Wp)
        return x.reshape(B * Hp * Wp, C).index_select(0, index).view(
            -1, ws * ws, C)

    def merge(self, windows, batch_size, hw_shape):
        """Tokens (B, H*W, C) from their windows (B*nh*nw, ws*ws, C), the
        padding left out."""
        H, W = hw_shape
        ws = self.window_size
        num_padded = windows.shape[0] // batch_size * ws * ws
        token = torch.arange(H * W, device=windows.device)
        row = token // W
        col = token - row * W
        window = row // ws * ceil_div(W, ws) + col // ws
        position = window * ws * ws + row % ws * ws + col % ws
        index = batch_index(position, batch_size, num_padded)
        tokens = windows.flatten(0, 1).index_select(0, index)
        return tokens.view(batch_size, H * W, -1)

    def attend(self, x, hw_shape=None, attn_bias=None):
        """Attention within windows of ``x`` (B, H*W, C), cut out and put
        back by index so that one compiled graph holds for every grid."""
        if attn_bias is not None:
            raise ValueError('LocallyGroupedAttention takes no attn_bias.')
        B = x.shape[0]
        H, W = hw_shape
        ws = self.window_size
        windows = self.partition(x, hw_shape)
        q, k, v = split_heads(self.qkv(windows), 3, self.num_heads)
        mask = None
        if not known_zero(H % ws, W % ws):
            mask = self.padding_mask(hw_shape, ws, x.device).repeat(
                B, 1, 1, 1)
        windows = merge_heads(self.scaled_dot_product(q, k, v, mask))
        return self.merge(windows, B, hw_shape)
