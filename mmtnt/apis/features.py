"""Image -> feature maps with mmpretrain's ``FeatureExtractor``, for the
names of mmtnt's model index."""
from mmengine.model import BaseModel
from mmpretrain.apis import FeatureExtractor as MMPretrainFeatureExtractor

from .inference import ClassificationInferencer
from .model import get_model


class FeatureExtractor(MMPretrainFeatureExtractor):
    """mmpretrain's ``FeatureExtractor``, reading images with as many
    channels as the model takes (:class:`ClassificationInferencer`).

    Args:
        model (str | Config | BaseModel): What
            :func:`mmtnt.apis.get_model` takes, or a built classifier.
        pretrained (str | bool): As :func:`mmtnt.apis.model_config` takes
            it. Defaults to True.
        device (str, optional): Defaults to the CPU.
        **kwargs: Changes to the config's ``model`` (not for a built one).

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
    """
    in_channels = ClassificationInferencer.in_channels
    preprocess = ClassificationInferencer.preprocess

    def __init__(self, model, pretrained=True, device=None, **kwargs):
        if not isinstance(model, BaseModel):
            model = get_model(model, pretrained, device, **kwargs)
            pretrained = False
        super().__init__(model, pretrained, device)
