"""Layer-wise learning-rate decay for classifiers, detectors and
segmentors alike."""
import functools

from mmpretrain.engine.optimizers import \
    LearningRateDecayOptimWrapperConstructor

from mmtnt.registry import OPTIM_WRAPPER_CONSTRUCTORS


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimWrapperConstructor(
        LearningRateDecayOptimWrapperConstructor):
    """mmpretrain's :class:`LearningRateDecayOptimWrapperConstructor` for
    any model with a ``backbone`` that has ``get_layer_depth``.

    Detectors and segmentors lack the ``get_layer_depth`` mmpretrain asks
    the model for; this asks ``model.backbone`` then. A parameter at depth
    ``d`` of ``n`` gets ``lr * layer_decay_rate ** (n - d - 1)``.

    Examples:
        >>> optim_wrapper = dict(
        ...     optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05),
        ...     constructor='mmtnt.LayerDecayOptimWrapperConstructor',
        ...     paramwise_cfg=dict(layer_decay_rate=0.9,
        ...                        norm_decay_mult=0.))
    """

    def add_params(self, params, module, prefix='', get_layer_depth=None,
                   **kwargs):
        """As mmpretrain's, finding ``get_layer_depth`` on
        ``module.backbone`` where ``module`` has none."""
        backbone = getattr(module, 'backbone', None)
        if get_layer_depth is None and not hasattr(
                module, 'get_layer_depth') and hasattr(
                    backbone, 'get_layer_depth'):
            get_layer_depth = functools.partial(
                backbone.get_layer_depth, prefix=f'{prefix}backbone.')
        super().add_params(params, module, prefix, get_layer_depth,
                           **kwargs)
