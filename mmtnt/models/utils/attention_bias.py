import torch

from .resize import resize_bicubic
from .shape import known_equal


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
        impl (str): One of :data:`~mmtnt.models.utils.resize.RESIZE_IMPLS`.
            Defaults to ``'interpolate'``.

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
