"""FLOPs, training logs and mmseg's confusion matrix, with the command
lines of ``tools/analysis_tools/`` (:mod:`~mmtnt.analysis.cli`)."""
from .flops import (analyze, default_shape, forward_macs, imagenet_variants,
                    load_config)
from .tables import format_table

__all__ = [
    'analyze', 'default_shape', 'forward_macs', 'format_table',
    'imagenet_variants', 'load_config'
]
