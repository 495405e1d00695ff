"""The plain layers every family is built from: stock PyTorch modules and
operators, the same on every device."""
from .attention import (LocallyGroupedAttention, MultiheadAttention,
                        SpatialReductionAttention)
from .block import TransformerBlock, drop_path_rates
from .layout import map_to_tokens, tokens_to_map
from .mlp import Mlp

__all__ = [
    'MultiheadAttention', 'SpatialReductionAttention',
    'LocallyGroupedAttention', 'TransformerBlock', 'drop_path_rates', 'Mlp',
    'map_to_tokens', 'tokens_to_map'
]
