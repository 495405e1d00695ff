from .arch import check_stage_lists, normalize_out_indices, resolve_arch
from .resize import (RESIZE_IMPLS, resize_attention_bias, resize_bicubic,
                     resize_pos_embed, set_resize_impl, square_grid)
from .shape import ceil_div, known_equal, known_zero, pad_to_multiple

__all__ = [
    'resize_pos_embed', 'resize_attention_bias', 'resize_bicubic',
    'RESIZE_IMPLS', 'set_resize_impl', 'resolve_arch',
    'normalize_out_indices', 'check_stage_lists', 'square_grid', 'ceil_div',
    'known_zero', 'known_equal', 'pad_to_multiple'
]
