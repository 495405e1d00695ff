"""Class activation maps (CAM) of mmtnt classifiers, through
``pytorch_grad_cam``: :class:`CAMReshape` lays tokens out on the grids the
backbone declares (``stage_token_grids``); the classifier and the image are
prepared as in testing."""
import mmcv
import numpy as np
import pytorch_grad_cam
import torch
import torch.nn.functional as F
from mmengine.dataset import Compose, default_collate
from mmengine.registry import DefaultScope
from pytorch_grad_cam.utils.image import show_cam_on_image
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget

from ..models.layers import tokens_to_map
from .target_layers import default_target_layers, layer_name, resolve_layer

#: ``--method`` names (case-insensitive) and their ``pytorch_grad_cam`` class.
METHODS = {
    'gradcam': pytorch_grad_cam.GradCAM,
    'gradcam++': pytorch_grad_cam.GradCAMPlusPlus,
    'gradcamplusplus': pytorch_grad_cam.GradCAMPlusPlus,
    'xgradcam': pytorch_grad_cam.XGradCAM,
    'eigencam': pytorch_grad_cam.EigenCAM,
    'eigengradcam': pytorch_grad_cam.EigenGradCAM,
    'layercam': pytorch_grad_cam.LayerCAM,
    'hirescam': pytorch_grad_cam.HiResCAM,
    'gradcamelementwise': pytorch_grad_cam.GradCAMElementWise,
    'scorecam': pytorch_grad_cam.ScoreCAM,
}


def crop_to_image(fmap, stride, image_hw):
    """Resample a map of ``stride``-pixel cells over an image padded at
    the bottom and right so that its h x w cells span the image only.

    Args:
        fmap (Tensor): Shape (B, C, h, w).
        stride (int): Pixels per cell.
        image_hw (tuple[int, int]): The image (H, W), at most the covered
            size.

    Examples:
        >>> x = torch.arange(4.).view(1, 1, 1, 4) * 8 + 4  # cell centres
        >>> crop_to_image(x, 8, (8, 28))[0, 0, 0, 1:]  # the same, on 28 px
        tensor([10.5000, 17.5000, 24.5000])
    """
    h, w = fmap.shape[-2:]
    sy, sx = image_hw[0] / (h * stride), image_hw[1] / (w * stride)
    if sy == 1 and sx == 1:
        return fmap
    theta = fmap.new_tensor([[sx, 0, sx - 1], [0, sy, sy - 1]])
    grid = F.affine_grid(
        theta.expand(fmap.shape[0], 2, 3), list(fmap.shape),
        align_corners=False)
    return F.grid_sample(
        fmap, grid, mode='bilinear', padding_mode='border',
        align_corners=False)


class CAMReshape:
    """The ``reshape_transform`` of ``pytorch_grad_cam`` for mmtnt's
    backbones: lay a target layer's output out as a map (B, C, h, w).

    Tokens (B, N, C) after the extra ones fill the stage grid of N cells of
    the backbone's input (recorded by a pre-hook); maps pass as they are.

    Args:
        model (ImageClassifier): The model, with a ``backbone``.

    Examples:
        >>> from mmengine.config import Config
        >>> cfg = Config.fromfile(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py')
        >>> model = build_classifier(cfg)
        >>> reshape = CAMReshape(model)
        >>> logits = model(torch.rand(1, 1, 32, 32))
        >>> reshape(torch.rand(1, 17, 64)).shape  # class token + 4x4
        torch.Size([1, 64, 4, 4])
        >>> reshape.remove()
    """

    def __init__(self, model):
        self.backbone = model.backbone
        self.input_shape = None
        self._handle = self.backbone.register_forward_pre_hook(self._record)

    def _record(self, module, args):
        self.input_shape = tuple(args[0].shape)

    def remove(self):
        """Remove the hook from the backbone."""
        self._handle.remove()

    def __call__(self, tensor):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f'The target layer returns a {type(tensor).__name__}, not a '
                'tensor: target one of its submodules (blocks of TNT and '
                'PyramidTNT return words and sentences: use e.g. '
                '`.outer` or `.outer.norm1`).')
        if self.input_shape is None:
            raise RuntimeError('Run the model before reshaping its outputs.')
        batch, _, height, width = self.input_shape
        # Backbones other than mmtnt's declare no grids.
        stage_token_grids = getattr(self.backbone, 'stage_token_grids',
                                    lambda height, width: [])
        grids = stage_token_grids(height, width)
        extra = getattr(self.backbone, 'num_extra_tokens', 0)
        if tensor.dim() == 4:
            fmap = tensor
        elif tensor.dim() == 3 and tensor.shape[0] == batch:
            num = tensor.shape[1] - extra
            matches = [g.hw for g in grids if g.hw[0] * g.hw[1] == num]
            if not matches:
                raise ValueError(self._mismatch(tensor, grids, extra))
            fmap = tokens_to_map(tensor[:, extra:], matches[0]).contiguous()
        else:
            raise ValueError(self._mismatch(tensor, grids, extra))
        for grid in grids:
            if tuple(fmap.shape[-2:]) == tuple(grid.hw):
                return crop_to_image(fmap, grid.stride, (height, width))
        return fmap

    def _mismatch(self, tensor, grids, extra):
        batch, _, height, width = self.input_shape
        known = ', '.join(sorted({f'{g.hw[0]}x{g.hw[1]}' for g in grids}))
        return (
            f'Cannot lay the target layer output of shape '
            f'{tuple(tensor.shape)} on the {height}x{width} input (batch '
            f'{batch}): expected a map (B, C, h, w) or tokens (B, '
            f'{"1 + " * extra}h*w, C) on a grid of '
            f'{type(self.backbone).__name__} ({known}). Choose a layer '
            'that outputs sentence or stage tokens, e.g. the default.')


def class_scores(model, logits):
    """Sigmoid of the logits for multi-label heads, else softmax."""
    from mmpretrain.models.heads import MultiLabelClsHead
    if isinstance(model.head, MultiLabelClsHead):
        return logits.sigmoid()
    return logits.softmax(dim=-1)


def compute_cam(model,
                inputs,
                target_layers=None,
                method='gradcam',
                categories=None,
                eigen_smooth=False,
                aug_smooth=False):
    """The class activation maps of an image.

    Args:
        model (ImageClassifier): The model; its forward returns logits.
        inputs (Tensor): One preprocessed image (1, C, H, W).
        target_layers (list[str | nn.Module], optional): Layers or their
            expressions. Defaults to :func:`default_target_layers`.
        method (str): A key of :data:`METHODS`. Defaults to ``'gradcam'``.
        categories (list[int], optional): Classes to explain. Defaults to
            the predicted one.
        eigen_smooth (bool): Keep the first principal component. Defaults
            to False.
        aug_smooth (bool): Average over augmented copies. Defaults to False.

    Returns:
        tuple[np.ndarray, list[int], list[float]]: The maps (K, H, W) in
        [0, 1], the categories and their probabilities.

    Examples:
        >>> from mmengine.config import Config
        >>> cfg = Config.fromfile(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py')
        >>> model = build_classifier(cfg)
        >>> cams, cats, scores = compute_cam(model, torch.rand(1, 1, 32, 32))
        >>> cams.shape, len(cats)
        ((1, 32, 32), 1)
    """
    if method.lower() not in METHODS:
        raise ValueError(f'Unknown CAM method {method!r}: choose one of '
                         f'{", ".join(METHODS)}.')
    if inputs.dim() != 4 or inputs.shape[0] != 1:
        raise ValueError(f'compute_cam takes one image (1, C, H, W), got '
                         f'{tuple(inputs.shape)}.')
    if target_layers is None:
        target_layers = default_target_layers(model)
    layers = [
        resolve_layer(model, layer) if isinstance(layer, str) else layer
        for layer in target_layers
    ]
    device = next(model.parameters()).device
    inputs = inputs.to(device)
    reshape = CAMReshape(model)
    try:
        # The scores, and a check that every target output can be a map.
        errors = []

        def check(module, args, output):
            try:
                reshape(output)
            except (TypeError, ValueError) as error:
                errors.append(f'{layer_name(model, module)}: {error}')

        handles = [layer.register_forward_hook(check) for layer in layers]
        try:
            model.eval()
            with torch.no_grad():
                scores = class_scores(model, model(inputs))[0]
        finally:
            for handle in handles:
                handle.remove()
        if errors:
            raise ValueError('\n'.join(errors))
        num_classes = scores.numel()
        if categories is None or len(categories) == 0:
            categories = [int(scores.argmax())]
        for c in categories:
            if not 0 <= c < num_classes:
                raise ValueError(f'Target category {c} is out of range: the '
                                 f'model has {num_classes} classes.')
        cam = METHODS[method.lower()](
            model=model, target_layers=layers, reshape_transform=reshape)
        try:
            cams = cam(
                inputs.expand(len(categories), -1, -1, -1),
                [ClassifierOutputTarget(c) for c in categories],
                aug_smooth=aug_smooth,
                eigen_smooth=eigen_smooth)
        finally:
            cam.activations_and_grads.release()
    finally:
        reshape.remove()
    cams = np.clip(np.nan_to_num(np.asarray(cams, np.float32)), 0, 1)
    return cams, list(categories), [float(scores[c]) for c in categories]


def blend_cam(image, cam, image_weight=0.5):
    """Draw a CAM over an image.

    Args:
        image (np.ndarray): HxWx3 uint8 BGR (or HxW grayscale).
        cam (np.ndarray): HxW in [0, 1].
        image_weight (float): The image's share. Defaults to 0.5.

    Returns:
        np.ndarray: HxWx3 uint8 BGR.

    Examples:
        >>> blend_cam(np.zeros((8, 6, 3), np.uint8),
        ...           np.random.rand(8, 6)).shape
        (8, 6, 3)
    """
    if image.ndim == 2 or image.shape[2] == 1:
        image = mmcv.gray2bgr(image.reshape(image.shape[:2]))
    cam = cam[:image.shape[0], :image.shape[1]]
    return show_cam_on_image(
        np.float32(image) / 255,
        cam,
        use_rgb=False,
        image_weight=image_weight)


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
