import torch

from .resize import resize_bicubic
from .shape import known_equal


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
        impl (str): One of :data:`~mmtnt.models.utils.resize.RESIZE_IMPLS`.
            Defaults to ``'interpolate'``.

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
