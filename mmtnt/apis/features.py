"""Image -> feature maps with mmpretrain's ``FeatureExtractor``.

mmpretrain's ``FeatureExtractor`` already does the work on mmtnt
classification configs: it builds the model through the registry (so
``type='mmtnt.TNT'`` resolves), runs the config's test pipeline and returns
each image's backbone outputs. What mmtnt adds is the input: images are read
with as many channels as the model normalises (grayscale for the
Fashion-MNIST demo), as :class:`ClassificationInferencer` reads them.

Which outputs come back is the backbone's config: ``out_indices`` and
``out_type='featmap'`` give the multi-scale maps, and TNT's
``out_type='cls_token'`` its class token at each chosen block. Where the
cells of each map lie (stride, channels) is what the backbone declares in
``token_grids``.
"""
from mmpretrain.apis import FeatureExtractor as MMPretrainFeatureExtractor

from .inference import ClassificationInferencer


class FeatureExtractor(MMPretrainFeatureExtractor):
    """mmpretrain's ``FeatureExtractor``, reading images with as many
    channels as the model takes.

    Args:
        model (str | Config | BaseModel): A config file, a loaded config or
            a built model (e.g. from a model name, see
            ``docs/inference.md``).
        pretrained (str | bool): The checkpoint, or False for the
            initialised weights. Defaults to True (a config's
            ``load_from``).
        device (str, optional): ``'cpu'``, ``'cuda'``... Defaults to the
            first GPU when there is one, else the CPU.
        **kwargs: Changes to the config's ``model`` (not for a built model),
            e.g. ``backbone=dict(out_indices=(0, 1, 2, 3),
            out_type='featmap')``.

    Examples:
        >>> import numpy as np
        >>> from mmtnt.apis.features import FeatureExtractor
        >>> extractor = FeatureExtractor(
        ...     'configs/twins/twins-pcpvt-small_8xb128_in1k.py',
        ...     pretrained=False, device='cpu',
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
