"""Bicubic resizing of learned position terms, by ``F.interpolate`` or by
two matrix products (:data:`RESIZE_IMPLS`)."""
import torch
import torch.nn.functional as F

from .shape import known_equal

#: ``'interpolate'`` (``F.interpolate``, the default) or ``'matrices'``
#: (``rows @ grid @ cols^T``, :func:`bicubic_matrix`: the same result).
RESIZE_IMPLS = ('interpolate', 'matrices')
#: The ``a`` of PyTorch's (and ONNX's) cubic convolution kernel.
CUBIC_A = -0.75


def check_resize_impl(impl):
    """Raise a ValueError unless ``impl`` is one of :data:`RESIZE_IMPLS`."""
    if impl not in RESIZE_IMPLS:
        raise ValueError(f'Unknown resize implementation {impl!r}: choose '
                         f'one of {RESIZE_IMPLS}.')


def cubic_weights(t):
    """The weights (..., 4) of the taps ``floor(x) - 1 .. floor(x) + 2`` of
    PyTorch's cubic convolution at fractional parts ``t`` (..., ).

    Examples:
        >>> cubic_weights(torch.tensor([0., 0.5]))
        tensor([[ 0.0000,  1.0000,  0.0000,  0.0000],
                [-0.0938,  0.5938,  0.5938, -0.0938]])
    """
    a = CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return torch.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], -1)


def bicubic_matrix(in_size, out_size, x):
    """The (out_size, in_size) matrix of PyTorch's bicubic interpolation
    along one axis, in the dtype and on the device of ``x``.

    Examples:
        >>> m = bicubic_matrix(4, 6, torch.zeros(1))
        >>> m.shape, torch.allclose(m.sum(1), torch.ones(6))
        (torch.Size([6, 4]), True)
    """
    position = torch.arange(out_size, device=x.device, dtype=x.dtype)
    source = (position + 0.5) * (in_size / out_size) - 0.5
    first = source.floor()
    weights = cubic_weights(source - first)
    taps = (first[:, None] + torch.arange(-1, 3, device=x.device)).clamp(
        0, in_size - 1)
    columns = torch.arange(in_size, device=x.device, dtype=x.dtype)
    one_hot = (taps[..., None] == columns).to(x.dtype)
    return (weights[..., None] * one_hot).sum(1)


def resize_bicubic(grid, size, impl='interpolate'):
    """Resize maps ``grid`` (N, C, H, W) bicubically to ``size``
    (``align_corners=False``) by ``impl``, one of :data:`RESIZE_IMPLS`.

    Examples:
        >>> x = torch.rand(1, 3, 8, 8)
        >>> torch.allclose(resize_bicubic(x, (5, 12), 'matrices'),
        ...                resize_bicubic(x, (5, 12)), atol=1e-6)
        True
    """
    check_resize_impl(impl)
    if impl == 'interpolate':
        return F.interpolate(
            grid, size=size, mode='bicubic', align_corners=False)
    rows = bicubic_matrix(grid.shape[-2], size[0], grid)
    cols = bicubic_matrix(grid.shape[-1], size[1], grid)
    return rows @ grid @ cols.transpose(0, 1)


def set_resize_impl(model, impl):
    """Set the ``resize_impl`` of every module of ``model`` that has one
    (TNT's and PyramidTNT's backbones).

    Args:
        model (nn.Module): Changed in place, and returned.
        impl (str): One of :data:`RESIZE_IMPLS`, else a ValueError.

    Examples:
        >>> from mmtnt.models import TNT, set_resize_impl
        >>> set_resize_impl(TNT(arch='s'), 'matrices').resize_impl
        'matrices'
    """
    check_resize_impl(impl)
    for module in model.modules():
        if hasattr(module, 'resize_impl'):
            module.resize_impl = impl
    return model


def square_grid(num_positions, what):
    """The square grid (side, side) of a checkpoint's ``num_positions``
    position terms; ``what`` names them in the ValueError for a non-square
    number.

    Examples:
        >>> square_grid(196, 'a position embedding')
        (14, 14)
    """
    side = int(round(num_positions**0.5))
    if side * side != num_positions:
        raise ValueError(
            f'Cannot resize {what} of {num_positions} positions: it is not '
            'a square grid. Build the model with the img_size the '
            'checkpoint was made at.')
    return side, side


def resize_pos_embed(pos_embed, src_shape, dst_shape, num_extra_tokens=0,
                     impl='interpolate'):
    """Resize a flattened grid of position embeddings bicubically.

    Args:
        pos_embed (Tensor): Shape (1, E + H*W, C); the first
            ``E = num_extra_tokens`` rows are kept as they are.
        src_shape (tuple[int, int]): The grid (H, W) ``pos_embed`` holds.
        dst_shape (tuple[int, int]): The grid to resize to.
        num_extra_tokens (int): Rows before the grid. Defaults to 0.
        impl (str): One of :data:`RESIZE_IMPLS`. Defaults to 'interpolate'.

    Returns:
        Tensor: Shape (1, E + dst_H*dst_W, C); ``pos_embed`` itself when
        the shapes already agree.

    Examples:
        >>> pos = torch.rand(1, 1 + 14 * 14, 384)
        >>> resize_pos_embed(pos, (14, 14), (20, 12), 1).shape
        torch.Size([1, 241, 384])
    """
    src_shape, dst_shape = tuple(src_shape), tuple(dst_shape)
    if known_equal(src_shape, dst_shape):
        return pos_embed
    src_h, src_w = src_shape
    if pos_embed.shape[1] != num_extra_tokens + src_h * src_w:
        raise ValueError(
            f'A position embedding of {pos_embed.shape[1]} tokens does not '
            f'hold {num_extra_tokens} extra tokens and a {src_h}x{src_w} '
            'grid.')
    extra = pos_embed[:, :num_extra_tokens]
    grid = pos_embed[:, num_extra_tokens:].reshape(1, src_h, src_w, -1)
    grid = resize_bicubic(grid.permute(0, 3, 1, 2), dst_shape, impl)
    grid = grid.flatten(2).transpose(1, 2)
    return torch.cat([extra, grid.to(pos_embed.dtype)], dim=1)


def _resize_grid_dim(bias, src_shape, dst_shape, impl):
    """Resize the grid stored in the last dim of ``bias`` (L, M, h*w)."""
    if known_equal(src_shape, dst_shape):
        return bias
    L, M, _ = bias.shape
    grid = bias.reshape(1, L * M, *src_shape)
    grid = resize_bicubic(grid, dst_shape, impl)
    return grid.reshape(L, M, dst_shape[0] * dst_shape[1])


def resize_attention_bias(bias, src_query_shape, src_key_shape,
                          dst_query_shape, dst_key_shape, impl='interpolate'):
    """Resize a learned attention bias between the query and key positions
    of two token grids (PyramidTNT's ``relative_pos``) bicubically, over
    the query grid, then the key grid.

    Args:
        bias (Tensor): Shape (1, heads, Hq*Wq, Hk*Wk).
        src_query_shape (tuple[int, int]): The query grid ``bias`` holds.
        src_key_shape (tuple[int, int]): The key grid ``bias`` holds.
        dst_query_shape (tuple[int, int]): The query grid to resize to.
        dst_key_shape (tuple[int, int]): The key grid to resize to.
        impl (str): One of :data:`RESIZE_IMPLS`. Defaults to 'interpolate'.

    Returns:
        Tensor: Shape (1, heads, dst_Hq*dst_Wq, dst_Hk*dst_Wk); ``bias``
        itself when the grids already agree.

    Examples:
        >>> bias = torch.rand(1, 4, 8 * 8, 2 * 2)
        >>> resize_attention_bias(bias, (8, 8), (2, 2), (10, 6),
        ...                       (2, 1)).shape
        torch.Size([1, 4, 60, 2])
    """
    src_query_shape, src_key_shape = tuple(src_query_shape), tuple(
        src_key_shape)
    dst_query_shape, dst_key_shape = tuple(dst_query_shape), tuple(
        dst_key_shape)
    if known_equal(src_query_shape + src_key_shape,
                   dst_query_shape + dst_key_shape):
        return bias
    _, heads, num_queries, num_keys = bias.shape
    if (num_queries != src_query_shape[0] * src_query_shape[1]
            or num_keys != src_key_shape[0] * src_key_shape[1]):
        raise ValueError(
            f'An attention bias over {num_queries} queries and {num_keys} '
            f'keys does not hold a {src_query_shape[0]}x'
            f'{src_query_shape[1]} query grid and a {src_key_shape[0]}x'
            f'{src_key_shape[1]} key grid.')
    # Interpolate in fp32: the bicubic kernels lack some half types.
    x = bias.reshape(heads, num_queries, num_keys)
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.float()
    # Queries first: the transposes then move source-sized tensors.
    x = _resize_grid_dim(
        x.transpose(1, 2), src_query_shape, dst_query_shape, impl)
    x = _resize_grid_dim(x.transpose(1, 2), src_key_shape, dst_key_shape,
                         impl)  # (heads, queries, keys)
    return x.reshape(1, *x.shape).to(bias.dtype).contiguous()
