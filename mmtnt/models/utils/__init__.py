from .arch import normalize_out_indices, resolve_arch
from .attention import MultiheadSelfAttention
from .pos_embed import resize_pos_embed
from .transformer import Mlp, TransformerLayer

__all__ = [
    'MultiheadSelfAttention', 'Mlp', 'TransformerLayer', 'resize_pos_embed',
    'resolve_arch', 'normalize_out_indices'
]
