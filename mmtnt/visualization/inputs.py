"""The classifier and the image of a class activation map, as in testing."""
import mmcv
import numpy as np
from mmengine.dataset import Compose, default_collate
from mmengine.registry import DefaultScope


def build_classifier(cfg, checkpoint=None, device='cpu'):
    """Build the classifier of a config and load its weights.

    Args:
        cfg (Config): An mmpretrain classification config.
        checkpoint (str, optional): The weights; None keeps the initialised
            ones.
        device (str): Where to put the model. Defaults to ``'cpu'``.

    Returns:
        ImageClassifier: In eval mode, every parameter taking gradients (a
        CAM needs them, whatever the config freezes).

    Examples:
        >>> from mmengine.config import Config
        >>> cfg = Config.fromfile(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py')
        >>> type(build_classifier(cfg)).__name__
        'ImageClassifier'
    """
    from mmpretrain.apis import get_model
    from mmpretrain.models import ImageClassifier
    scope = cfg.get('default_scope')
    if scope != 'mmpretrain':
        raise ValueError(
            f'vis_cam.py explains image classifiers (configs with '
            f"default_scope='mmpretrain'); this config has "
            f'default_scope={scope!r} (a detector or segmentor).')
    model = get_model(cfg, checkpoint, device=device)
    if not isinstance(model, ImageClassifier) or not model.with_head:
        raise ValueError(
            f'vis_cam.py explains image classifiers with a head; the config '
            f'builds a {type(model).__name__}'
            f'{"" if getattr(model, "with_head", False) else " without one"}'
            '.')
    model.requires_grad_(True)
    return model.eval()


def image_pipeline(cfg):
    """The config's test pipeline, without its image-loading transform."""
    if 'test_dataloader' in cfg:
        dataset = cfg.test_dataloader.dataset
        while 'dataset' in dataset:  # dataset wrappers
            dataset = dataset.dataset
        pipeline = dataset.pipeline
    elif 'test_pipeline' in cfg:
        pipeline = cfg.test_pipeline
    else:
        raise ValueError('The config has no test pipeline '
                         '(test_dataloader.dataset.pipeline).')
    return [t for t in pipeline if t['type'] != 'LoadImageFromFile']


def load_image(img, cfg, model):
    """Read an image (grayscale for a one-channel model) and prepare it as
    in testing.

    Args:
        img (str | np.ndarray): An image file, or an HxW(xC) uint8 array.
        cfg (Config): The full config (its test pipeline is used).
        model (ImageClassifier): The model (its data preprocessor is used).

    Returns:
        tuple[Tensor, np.ndarray]: The model's input (1, C, H, W) and the
        transformed image (H, W, 3), uint8 BGR, to draw the map on.

    Examples:
        >>> from mmengine.config import Config
        >>> cfg = Config.fromfile(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py')
        >>> model = build_classifier(cfg)
        >>> inputs, image = load_image(np.zeros((28, 28), np.uint8), cfg,
        ...                            model)
        >>> inputs.shape, image.shape
        (torch.Size([1, 1, 32, 32]), (32, 32, 3))
    """
    from mmpretrain.registry import TRANSFORMS
    gray = model.data_preprocessor.mean is not None and \
        model.data_preprocessor.mean.numel() == 1
    flag = 'grayscale' if gray else 'color'
    if isinstance(img, str):
        array = mmcv.imread(img, flag=flag)
        if array is None:
            raise ValueError(f'Cannot read the image {img}.')
    else:
        array = img
        if gray and array.ndim == 3 and array.shape[2] == 3:
            array = mmcv.bgr2gray(array)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        pipeline = Compose(
            [TRANSFORMS.build(t) for t in image_pipeline(cfg)])
    data = pipeline(
        dict(img=array, img_shape=array.shape[:2],
             ori_shape=array.shape[:2]))
    image = data['inputs'].numpy().transpose(1, 2, 0)
    if image.shape[2] == 1:
        image = mmcv.gray2bgr(image[:, :, 0])
    data = model.data_preprocessor(default_collate([data]), False)
    return data['inputs'], np.ascontiguousarray(image)
