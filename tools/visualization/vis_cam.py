"""Draw the class activation map (CAM) of an mmtnt classifier on an image.

The image goes through the config's test pipeline and data preprocessor, as
in testing; ``pytorch_grad_cam`` (the ``grad-cam`` package) weighs the
outputs of the target layers by the gradients of the chosen class score (or
without gradients, for Eigen-CAM); the map, as large as the transformed
image, is drawn over it and saved as a PNG.

The backbones emit tokens, which :class:`CAMReshape` lays out as maps on
the token grids that every mmtnt backbone declares for an input size
(``stage_token_grids``): tokens (B, extra + h * w, C) of a stage, after the
backbone's extra tokens (TNT's class token, ``num_extra_tokens``), fill the
stage's grid row by row.

The grids are worked out from the size of the image entering the backbone
(recorded by a forward hook), so any input size works; where a backbone
padded the image up to a multiple of its stride, the map is resampled to the
image's own extent, so that it lies on the pixels it describes.

Examples::

    python tools/visualization/vis_cam.py shirt.png \\
        configs/demo/tnt-demo_1xb128_fashion-mnist.py \\
        work_dirs/demo/epoch_4.pth --save-path cam.png
    python tools/visualization/vis_cam.py cat.jpg \\
        configs/twins/twins-svt-s_16xb64_in1k.py svt-s.pth \\
        --method layercam --target-layers "backbone.stages[-2].norm" \\
        --target-category 281 282 --save-path cam.png
"""
import argparse
import ast
import os.path as osp

import mmcv
import numpy as np
import pytorch_grad_cam
import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.config import Config, DictAction
from mmengine.dataset import Compose, default_collate
from mmengine.registry import DefaultScope
from mmengine.utils.dl_utils import is_norm
from pytorch_grad_cam.utils.image import show_cam_on_image
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget

from mmtnt.models.layers import tokens_to_map
from mmtnt.utils import register_checkpoint_safe_globals

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


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Draw the class activation map of an mmtnt classifier '
        'on an image.')
    parser.add_argument('img', help='the image file')
    parser.add_argument('config', help='the classifier config')
    parser.add_argument('checkpoint', help='the checkpoint')
    parser.add_argument(
        '--target-layers',
        nargs='+',
        default=[],
        help='layers whose outputs make the CAM, as Python expressions '
        'relative to the model, e.g. "backbone.stages[-1].blocks[-1].norm1" '
        '(several are averaged); default: chosen from the backbone type')
    parser.add_argument(
        '--method',
        default='gradcam',
        help=f'the CAM method, one of {", ".join(METHODS)} '
        '(case-insensitive)')
    parser.add_argument(
        '--target-category',
        nargs='+',
        type=int,
        default=[],
        help='class indices to explain, one map each; default: the '
        'predicted class')
    parser.add_argument(
        '--eigen-smooth',
        action='store_true',
        help='keep the first principal component of the weighted outputs '
        '(less noise)')
    parser.add_argument(
        '--aug-smooth',
        action='store_true',
        help='average the maps of flipped and rescaled-intensity copies of '
        'the image')
    parser.add_argument(
        '--save-path',
        help='the PNG to write; with several categories, NAME_<category>.png '
        'per category. Without it the picture is shown in a window')
    parser.add_argument(
        '--device', default='cpu', help='e.g. cpu or cuda:0 (default: cpu)')
    parser.add_argument(
        '--preview-model',
        action='store_true',
        help='print the names of the layers that may be targeted and exit')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, key=value')
    args = parser.parse_args(argv)
    if args.method.lower() not in METHODS:
        parser.error(f'unknown --method {args.method!r}: choose one of '
                     f'{", ".join(METHODS)}.')
    return args


def build_classifier(cfg, checkpoint=None, device='cpu'):
    """Build the classifier of a config and load its weights.

    Args:
        cfg (Config): An mmpretrain classification config.
        checkpoint (str, optional): The weights; None keeps the initialised
            ones.
        device (str): Where to put the model. Defaults to ``'cpu'``.

    Returns:
        ImageClassifier: The model in eval mode, every parameter taking
        gradients (a CAM needs them at the target layer, whatever the config
        freezes).

    Raises:
        ValueError: If the config is not an image classifier's.

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
    register_checkpoint_safe_globals()
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
    """The config's test pipeline, without its image-loading transform.

    Args:
        cfg (Config): The full config.

    Returns:
        list[dict]: The transform configs.
    """
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
    """Read an image and prepare it as in testing.

    The image is read in grayscale when the model's data preprocessor
    normalises one channel (the Fashion-MNIST demo), else in colour (BGR).

    Args:
        img (str | np.ndarray): An image file, or an HxW(xC) uint8 array.
        cfg (Config): The full config (its test pipeline is used).
        model (ImageClassifier): The model (its data preprocessor is used).

    Returns:
        tuple[Tensor, np.ndarray]: The model's input (1, C, H, W) and the
        transformed image (H, W, 3), uint8 BGR, to draw the map on.

    Examples:
        >>> import numpy as np
        >>> inputs, image = load_image(np.zeros((28, 28), np.uint8), cfg,
        ...                            model)  # the Fashion-MNIST demo's
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


def layer_expression(name):
    """A ``named_modules`` name written as a Python expression.

    Examples:
        >>> layer_expression('backbone.stages.3.blocks.0.norm1')
        'backbone.stages[3].blocks[0].norm1'
    """
    out = ''
    for part in name.split('.'):
        out += f'[{part}]' if part.isdigit() else ('.' if out else '') + part
    return out


def _children(module, expression):
    """The expressions of the children of ``module``, named
    ``expression``."""
    names = [
        layer_expression(f'{expression}.{n}' if expression else n)
        for n, _ in module.named_children()
    ]
    return ', '.join(names) or '(none: it is a leaf module)'


def resolve_layer(model, expression):
    """Find the submodule of ``model`` that ``expression`` names.

    Args:
        model (nn.Module): The model.
        expression (str): Attributes and integer indices from the model,
            e.g. ``'backbone.stages[-1].blocks[-1].norm1'``; a
            ``named_modules`` name (``'backbone.stages.3.norm'``) works too.

    Returns:
        nn.Module: The layer.

    Raises:
        ValueError: If the expression names no submodule; the message lists
            the submodules where the lookup stopped.

    Examples:
        >>> layer = resolve_layer(model, 'backbone.blocks[-1].outer.norm1')
        >>> type(layer).__name__, layer is resolve_layer(
        ...     model, 'backbone.blocks.3.outer.norm1')
        ('LayerNorm', True)
    """
    modules = dict(model.named_modules())
    if expression in modules and expression:
        return modules[expression]
    try:
        node = ast.parse(expression.strip(), mode='eval').body
    except SyntaxError:
        node = None
    steps = []
    while node is not None:
        if isinstance(node, ast.Attribute):
            steps.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            try:
                index = ast.literal_eval(node.slice)
            except ValueError:
                index = None
            if not isinstance(index, int):
                node = None
                break
            steps.append(index)
            node = node.value
        elif isinstance(node, ast.Name):
            steps.append(node.id)
            break
        else:
            node = None
    if node is None:
        raise ValueError(
            f'Cannot read the target layer {expression!r}: write attributes '
            f'and integer indices from the model, e.g. '
            f'"backbone.stages[-1].norm". The model has: '
            f'{_children(model, "")}.')
    layer, path = model, ''
    for step in reversed(steps):
        if isinstance(step, int):
            if not isinstance(layer, (nn.ModuleList, nn.Sequential)):
                raise ValueError(
                    f'Target layer {expression!r}: {path} is a '
                    f'{type(layer).__name__}, which cannot be indexed; its '
                    f'submodules are {_children(layer, path)}.')
            if not -len(layer) <= step < len(layer):
                raise ValueError(
                    f'Target layer {expression!r}: {path} has '
                    f'{len(layer)} items, there is no [{step}].')
            layer, path = layer[step], f'{path}[{step}]'
            continue
        child = layer._modules.get(step) if isinstance(layer,
                                                       nn.Module) else None
        if child is None:
            where = path or 'the model'
            raise ValueError(
                f'Target layer {expression!r}: {where} has no submodule '
                f'{step!r}; its submodules are '
                f'{_children(layer, path)}.')
        layer, path = child, f'{path}.{step}' if path else step
    return layer


def layer_name(model, layer):
    """The expression naming ``layer`` in ``model`` (or its repr)."""
    for name, module in model.named_modules():
        if module is layer:
            return layer_expression(name)
    return repr(layer)


def default_target_layers(model):
    """The layers whose CAM is drawn unless ``--target-layers`` is given.

    - mmtnt backbones: the layer whose tokens their last output is made
      from (``token_layer``): the final norm, or the last stage's, whose
      tokens the head averages; for TNT with a class-token output, the norm
      before the last block's sentence attention, where the class token
      reads the sentences.
    - Other backbones: the last normalisation layer of the backbone.

    Args:
        model (ImageClassifier): The model.

    Returns:
        list[str]: Target layer expressions.

    Examples:
        >>> default_target_layers(model)  # the Fashion-MNIST demo's TNT
        ['backbone.blocks[3].outer.norm1']
    """
    backbone = model.backbone
    token_layer = getattr(backbone, 'token_layer', None)
    if token_layer is not None:
        return [layer_expression(f'backbone.{token_layer()}')]
    norms = [
        name for name, module in backbone.named_modules(prefix='backbone')
        if is_norm(module)
    ]
    if not norms:
        raise ValueError(
            f'No default target layer for a {type(backbone).__name__} '
            'backbone: give --target-layers.')
    return [layer_expression(norms[-1])]


def crop_to_image(fmap, stride, image_hw):
    """Resample a map whose cells are ``stride`` pixels, laid from the
    top-left corner over an image padded at the bottom and right, so that
    it spans the image only.

    The map keeps its number of cells; bilinear sampling (linear, so maps
    and their gradients are resampled alike) takes each cell's value at the
    position of its centre on the image.

    Args:
        fmap (Tensor): Shape (B, C, h, w), covering ``h * stride`` x
            ``w * stride`` pixels.
        stride (int): Pixels per cell.
        image_hw (tuple[int, int]): The image (H, W), at most the covered
            size.

    Returns:
        Tensor: Shape (B, C, h, w), covering H x W pixels.

    Examples:
        >>> import torch
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
    backbones: lay a target layer's output out as a map (B, C, h, w) over
    the input image.

    A forward pre-hook on the backbone records the size of its input; the
    backbone's stage token grids of that size say where the tokens lie.
    Tokens (B, N, C) are taken, after the backbone's extra tokens (TNT's
    class token), as the row-major grid with as many cells; maps
    (B, C, h, w) pass as they are. Either is then resampled to the image's
    own extent when the backbone padded it (:func:`crop_to_image`).

    Args:
        model (ImageClassifier): The model, with a ``backbone``.

    Examples:
        >>> import torch
        >>> reshape = CAMReshape(model)  # the Fashion-MNIST demo's TNT
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
        # Backbones other than mmtnt's declare no grids: maps pass as they
        # are.
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
    """Probabilities from the head's logits: sigmoid for multi-label heads,
    softmax otherwise."""
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
        target_layers (list[str | nn.Module], optional): Layers (or their
            expressions, see :func:`resolve_layer`). Defaults to
            :func:`default_target_layers`.
        method (str): A key of :data:`METHODS`. Defaults to ``'gradcam'``.
        categories (list[int], optional): Classes to explain. Defaults to
            the predicted one.
        eigen_smooth (bool): Keep the first principal component of the
            weighted outputs. Defaults to False.
        aug_smooth (bool): Average over flipped and rescaled-intensity
            copies. Defaults to False.

    Returns:
        tuple[np.ndarray, list[int], list[float]]: The maps (K, H, W),
        float32 in [0, 1], one per category; the categories; their scores
        (probabilities).

    Examples:
        >>> import torch
        >>> cams, cats, scores = compute_cam(model, torch.rand(1, 3, 64, 80))
        >>> cams.shape, len(cats)
        ((1, 64, 80), 1)
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
        # A forward without gradients: the scores, and a check that every
        # target layer's output can be laid out as a map.
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
        image_weight (float): The image's share of the blend.
            Defaults to 0.5.

    Returns:
        np.ndarray: HxWx3 uint8 BGR, the map in the jet colour map.

    Examples:
        >>> import numpy as np
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


def output_paths(save_path, categories):
    """One PNG per category: ``save_path`` itself for one category,
    ``NAME_<category>.EXT`` for several."""
    if save_path is None:
        return [None] * len(categories)
    if len(categories) == 1:
        return [save_path]
    stem, ext = osp.splitext(save_path)
    return [f'{stem}_{c}{ext or ".png"}' for c in categories]


def main(argv=None):
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    try:
        model = build_classifier(cfg, args.checkpoint, args.device)
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(f'Error: {error}')
    if args.preview_model:
        for name, _ in model.named_modules():
            if name:
                print(layer_expression(name))
        return
    try:
        inputs, image = load_image(args.img, cfg, model)
        layers = args.target_layers or default_target_layers(model)
        modules = [resolve_layer(model, layer) for layer in layers]
        print('Target layers: ' +
              ', '.join(layer_name(model, m) for m in modules))
        cams, categories, scores = compute_cam(
            model,
            inputs,
            modules,
            method=args.method,
            categories=args.target_category,
            eigen_smooth=args.eigen_smooth,
            aug_smooth=args.aug_smooth)
    except ValueError as error:
        raise SystemExit(f'Error: {error}')
    classes = getattr(model, '_dataset_meta', {}).get('classes')
    for cam, category, score, path in zip(
            cams, categories, scores, output_paths(args.save_path,
                                                   categories)):
        name = f' ({classes[category]})' if classes else ''
        print(f'Target category: {category}{name}, score {score:.4f}')
        if cam.max() - cam.min() < 1e-6:
            print(f'Warning: the CAM of category {category} is flat: the '
                  'target layers do not change its score (e.g. tokens after '
                  'the last attention of a class-token model); choose '
                  'earlier ones with --target-layers.')
        drawn = blend_cam(image, cam)
        if path is None:
            mmcv.imshow(drawn, win_name=f'{args.method} {category}')
        else:
            mmcv.imwrite(drawn, path)
            print(f'Saved the CAM to {path}')


if __name__ == '__main__':
    main()
