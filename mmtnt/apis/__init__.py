"""Inference on images with mmtnt models of the three tasks, models by name,
the builder they share with :mod:`mmtnt.deploy`, and their feature maps."""
from .features import FeatureExtractor
from .inference import ClassificationInferencer, build_inferencer
from .model import (get_model, inference_model, init_model, list_models,
                    model_config)

__all__ = [
    'ClassificationInferencer', 'FeatureExtractor', 'build_inferencer',
    'get_model', 'inference_model', 'init_model', 'list_models',
    'model_config'
]
