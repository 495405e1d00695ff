from .arch import normalize_out_indices, resolve_arch
from .attention_bias import resize_attention_bias
from .pos_embed import resize_pos_embed
from .shape import ceil_div, known_equal, known_zero

__all__ = [
    'resize_pos_embed', 'resize_attention_bias', 'resolve_arch',
    'normalize_out_indices', 'ceil_div', 'known_zero', 'known_equal'
]
