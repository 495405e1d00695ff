"""Inference on images with mmtnt models, for the three tasks, and models
by name (``list_models``, ``get_model``, ``inference_model``)."""
from .inference import (ClassificationInferencer, build_inferencer,
                        summarize_prediction)
from .model import get_model, inference_model, list_models

__all__ = [
    'ClassificationInferencer', 'build_inferencer', 'get_model',
    'inference_model', 'list_models', 'summarize_prediction'
]
