"""Inference on images with mmtnt models, for the three tasks."""
from .inference import (ClassificationInferencer, build_inferencer,
                        summarize_prediction)

__all__ = [
    'ClassificationInferencer', 'build_inferencer', 'summarize_prediction'
]
