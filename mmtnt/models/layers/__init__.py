"""The plain layers every family is built from."""
from .attention import (ATTENTION_IMPLS, LocallyGroupedAttention,
                        MultiheadAttention, SpatialReductionAttention,
                        set_attention_impl)
from .block import Mlp, TransformerBlock, drop_path_rates
from .layout import map_to_tokens, tokens_to_map

__all__ = [
    'ATTENTION_IMPLS', 'MultiheadAttention', 'SpatialReductionAttention',
    'LocallyGroupedAttention', 'set_attention_impl', 'TransformerBlock',
    'drop_path_rates', 'Mlp', 'map_to_tokens', 'tokens_to_map'
]
