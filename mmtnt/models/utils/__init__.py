from .arch import normalize_out_indices, resolve_arch
from .attention import MultiheadSelfAttention
from .gelu_mlp import gelu_mlp
from .onednn_linear import Linear, linear
from .pos_embed import resize_pos_embed
from .transformer import Mlp, TransformerLayer

__all__ = [
    'Linear', 'linear', 'MultiheadSelfAttention', 'Mlp', 'gelu_mlp',
    'TransformerLayer', 'resize_pos_embed', 'resolve_arch',
    'normalize_out_indices'
]
