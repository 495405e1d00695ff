"""FLOPs, training logs and mmseg's confusion matrix, with the command
lines of ``tools/analysis_tools/`` (:mod:`~mmtnt.analysis.cli`).

Examples:
    >>> from mmtnt.analysis import forward_macs
    >>> import torch
    >>> forward_macs(torch.nn.Linear(8, 4), torch.rand(1, 8))
    32
"""
from .flops import (analyze, default_shape, forward_macs, imagenet_variants,
                    load_config)
from .tables import format_table

__all__ = [
    'analyze', 'default_shape', 'forward_macs', 'format_table',
    'imagenet_variants', 'load_config'
]
