"""Inference on images with mmtnt models, for the three tasks, models by
name (``list_models``, ``get_model``, ``inference_model``), the builder
they share with :mod:`mmtnt.deploy` (``model_config``, ``init_model``) and
their feature maps (``FeatureExtractor``)."""
from .features import FeatureExtractor
from .inference import ClassificationInferencer, build_inferencer
from .model import (get_model, inference_model, init_model, list_models,
                    model_config)

__all__ = [
    'ClassificationInferencer', 'FeatureExtractor', 'build_inferencer',
    'get_model', 'inference_model', 'init_model', 'list_models',
    'model_config'
]
