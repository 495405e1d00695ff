"""Class activation maps of mmtnt classifiers (``tools/visualization/
vis_cam.py``), through ``pytorch_grad_cam`` (the ``grad-cam`` package)."""
from .cam import METHODS, CAMReshape, blend_cam, compute_cam, crop_to_image
from .inputs import build_classifier, load_image
from .target_layers import (default_target_layers, layer_expression,
                            resolve_layer)

__all__ = [
    'METHODS', 'CAMReshape', 'blend_cam', 'compute_cam', 'crop_to_image',
    'build_classifier', 'load_image', 'default_target_layers',
    'layer_expression', 'resolve_layer'
]
