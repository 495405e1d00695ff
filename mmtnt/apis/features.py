"""Image -> feature maps with mmpretrain's ``FeatureExtractor``.

mmpretrain's ``FeatureExtractor`` already does the work on mmtnt
classification models: it runs the config's test pipeline and the data
preprocessor, and returns each image's backbone (or neck) outputs. What mmtnt
adds: the names of mmtnt's model index (models built by
:func:`mmtnt.apis.get_model`, ``pretrained=True`` through ``mmtnt://NAME``),
and images read with as many channels as the model normalises (grayscale for
the Fashion-MNIST demo), as :class:`ClassificationInferencer` reads them.

Which outputs come back is the backbone's config: ``out_indices`` and
``out_type='featmap'`` give the multi-scale maps, and TNT's
``out_type='cls_token'`` its class token at each chosen block. Where the
cells of each map lie (stride, channels) is what the backbone declares in
``token_grids``.
"""
from mmengine.model import BaseModel
from mmpretrain.apis import FeatureExtractor as MMPretrainFeatureExtractor

from .inference import ClassificationInferencer
from .model import get_model


class FeatureExtractor(MMPretrainFeatureExtractor):
    """mmpretrain's ``FeatureExtractor``, reading images with as many
    channels as the model takes.

    Args:
        model (str | Config | BaseModel): A classifier: a name of mmtnt's
            model index (:func:`mmtnt.apis.list_models`), a config file, a
            loaded config or a built model.
        pretrained (str | bool): True for a named model's published weights
            (a config's ``load_from``), a checkpoint, or False for the
            initialised weights. Defaults to True.
        device (str, optional): ``'cpu'``, ``'cuda'``... Defaults to the
            CPU.
        **kwargs: Changes to the config's ``model`` (not for a built model),
            e.g. ``backbone=dict(out_indices=(0, 1, 2, 3),
            out_type='featmap')``.

    Examples:
        >>> import numpy as np
        >>> from mmtnt.apis import FeatureExtractor
        >>> extractor = FeatureExtractor(
        ...     'twins-pcpvt-small_8xb128_in1k', pretrained=False,
        ...     backbone=dict(out_indices=(0, 1, 2, 3), out_type='featmap'))
        >>> image = np.zeros((300, 400, 3), np.uint8)  # or an image file
        >>> maps = extractor(image, stage='backbone')[0]
        >>> [tuple(m.shape) for m in maps]
        [(64, 56, 56), (128, 28, 28), (320, 14, 14), (512, 7, 7)]
        >>> grids = extractor.model.backbone.token_grids(224, 224)
        >>> [(g.stride, g.channels) for g in grids]
        [(4, 64), (8, 128), (16, 320), (32, 512)]
    """
    in_channels = ClassificationInferencer.in_channels
    preprocess = ClassificationInferencer.preprocess

    def __init__(self, model, pretrained=True, device=None, **kwargs):
        if not isinstance(model, BaseModel):
            model = get_model(model, pretrained, device, **kwargs)
            pretrained = False
        super().__init__(model, pretrained, device)
