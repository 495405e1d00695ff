"""Class activation maps of mmtnt classifiers through ``pytorch_grad_cam``
(``tools/visualization/vis_cam.py``)."""
from .cam import (METHODS, CAMReshape, blend_cam, build_classifier,
                  compute_cam, crop_to_image, load_image)
from .target_layers import (default_target_layers, layer_expression,
                            resolve_layer)

__all__ = [
    'METHODS', 'CAMReshape', 'blend_cam', 'compute_cam', 'crop_to_image',
    'build_classifier', 'load_image', 'default_target_layers',
    'layer_expression', 'resolve_layer'
]
