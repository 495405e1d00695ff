"""Export an mmtnt classifier, segmentor or detector to ONNX, and check the
graph with ONNX Runtime.

What the graph computes:

- classifiers (mmpretrain ``ImageClassifier``, configs with
  ``default_scope='mmpretrain'``): images -> class scores (N, num_classes),
  the head's logits through softmax (sigmoid for multi-label heads), i.e.
  the ``pred_score`` of mmpretrain's ``predict``; ``--logits`` exports the
  logits themselves (``model(x, mode='tensor')``);
- segmentors (mmseg ``EncoderDecoder``, ``default_scope='mmseg'``): images
  -> segmentation logits (N, num_classes, H, W) at the input resolution,
  i.e. ``model.encode_decode`` (the decode head's logits resized
  bilinearly to the input), what ``test_cfg=dict(mode='whole')`` inference
  computes before the arg-max. Sliding-window inference is not part of the
  graph;
- detectors (mmdet RetinaNet, and Mask R-CNN / Faster R-CNN: RPNHead with a
  StandardRoIHead; ``default_scope='mmdet'``): one image (1, C, H, W) ->
  its detections after post-processing, ``boxes`` (K, 4) xyxy in input
  pixels, ``scores`` (K, ) by decreasing score, ``labels`` (K, ) int64 and,
  for Mask R-CNN, ``masks`` (K, h, w), as mmdet's ``predict(...,
  rescale=False)`` (:class:`mmtnt.deploy.DetectorGraph`). The batch is
  always 1. An optional second input ``img_shape`` (int64 (2, )) is the
  image's height and width before padding (mmdet's ``img_shape``, which
  boxes are clipped to and masks have); not fed, it is the input's size.

The input is the image as the model receives it (N, C, H, W) in float32:
already normalised by the config's data preprocessor (``(img - mean) /
std``, channels in its order), which is printed. The plain model is exported:
mmtnt's CPU accelerator (``mmtnt.accelerate_for_cpu``) is not applied.

The graph is made by ``torch.onnx.export(..., dynamo=True)`` from a
``torch.export`` program. With ``--dynamic-export`` the batch, height and
width are symbols: the backbones' padding, LSA windows and masks, and the
resizing of position embeddings and attention biases are computed from the
input size inside the graph, so one graph serves every size the model takes
(the printed range is what the tracer checked; it may start above the
model's smallest input, whose 1-token maps it did not consider).
PyTorch's older TorchScript exporter (``dynamo=False``, deprecated) is not
used: its tracer fixes every ``if`` on a size at the example's value, so
the padding and masking would be kept or dropped for all sizes. During the
export, adaptive average pooling to more than 1x1 (mmseg's pyramid pooling
in UPerHead and PSPHead) runs as :class:`AdaptiveAvgPool2dGraph`, whose
windows follow the input size; the stock decomposition keeps the example's.
``--verify`` runs the graph with ONNX Runtime (CPU) on random input
at the export size and, with ``--dynamic-export``, at a second size and
batch, and compares with PyTorch. A classifier's scores (or logits) are
compared one by one: each within ``atol + rtol * |torch|`` of PyTorch's
(:data:`CLS_TOLERANCES`), so that a logit off by 2 fails even on a class
of score 1e-6, which a difference relative to the largest score would
hide. A segmentor's logits: the relative difference
``max|onnx - torch| / max|torch|`` must not exceed ``--tolerance``.

For detectors the graph holds the box decoding, NMS (ONNX
``NonMaxSuppression``) and, for Mask R-CNN, ``RoiAlign`` and the mask
pasting, all standard ONNX operators; ``--dynamic-export`` makes height and
width dynamic (not the batch). ``--verify`` compares ONNX Runtime with
mmdet's own eager ``predict`` (mmcv's NMS and RoIAlign) at ``--shape`` and,
with ``--dynamic-export``, at two other sizes, on ``--verify-image``
resized (random pixels without it): the same number of detections and
labels, boxes within ``DET_BOX_TOLERANCE`` of the input's longer side,
scores within ``DET_SCORE_TOLERANCE``, mask IoU at least
``DET_MASK_IOU``; detections whose scores are that close may come in
another order (they are matched as a set, and counted).

``--int8 dynamic|static`` also writes an INT8 graph for ONNX Runtime on
the CPU (``mmtnt.deploy.quantize.quantize_onnx``; static mode calibrates on
``--calibration-images`` training images through the validation pipeline
and the model's data preprocessor). Its weights use 7 bits, so that it
computes the same on CPUs with and without VNNI. It is not compared by
``--verify``: docs/inference.md gives its accuracy on the demos and which
layers stay fp32.

Examples::

    python tools/deployment/pytorch2onnx.py \\
        configs/twins/twins-svt-small_8xb128_in1k.py svt-s.pth \\
        --output-file svt-s.onnx --shape 224 224 --dynamic-export --verify
    python tools/deployment/pytorch2onnx.py \\
        configs/twins/twins-svt-small_8xb128_in1k.py \\
        mmtnt://twins-svt-small_8xb128_in1k --output-file svt-s.onnx \\
        --shape 224 224 --verify
    python tools/deployment/pytorch2onnx.py \\
        configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py \\
        --output-file upernet.onnx --shape 128 128 --dynamic-export \\
        --verify --verify-shape 96 160
    python tools/deployment/pytorch2onnx.py \\
        configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py \\
        retinanet.pth --output-file retinanet.onnx --shape 128 128 \\
        --dynamic-export --verify --verify-image scene.jpg
    python tools/deployment/pytorch2onnx.py \\
        configs/twins/twins-svt-small_8xb128_in1k.py svt-s.pth \\
        --output-file svt-s.onnx --shape 224 224 --dynamic-export \\
        --int8 dynamic
"""
import argparse
import contextlib
import logging
import os
import os.path as osp
import sys

import numpy as np
import torch
import torch.nn as nn
from mmengine.config import Config, DictAction
from mmengine.logging import MMLogger, print_log
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import MODELS, init_default_scope
from mmengine.runner import load_checkpoint

from mmtnt.deploy import DetectorGraph
from mmtnt.deploy.detection import UNPADDED
from mmtnt.hub import HubError, prepare_checkpoint
from mmtnt.models.utils import ceil_div
from mmtnt.utils import register_checkpoint_safe_globals

#: Relative difference (``max|onnx - torch| / max|torch|``) accepted by
#: a segmentor's ``--verify``.
DEFAULT_TOLERANCE = 1e-4
#: Classifiers' ``--verify``: ``(rtol, atol)`` of each output, which must
#: be within ``atol + rtol * |torch|`` of PyTorch's. A logit off by 2
#: changes its class's score by a factor of about e**2 (or e**-2),
#: however small the score: the scores' atol, float32's smallest normal
#: number, only absorbs scores that underflow.
CLS_TOLERANCES = dict(
    scores=(1e-3, float(np.finfo(np.float32).tiny)), logits=(1e-3, 1e-3))
#: Detectors' ``--verify``: the largest box coordinate difference, as a
#: fraction of the input's longer side; the largest score difference
#: (scores this close may also swap places); the smallest mask IoU.
DET_BOX_TOLERANCE = 1e-3
DET_SCORE_TOLERANCE = 1e-4
DET_MASK_IOU = 0.99
#: ONNX stores a graph with its weights in one protobuf of at most 2 GiB;
#: larger weights go to an external ``.data`` file.
MAX_EMBEDDED_WEIGHT_BYTES = 1.8 * 2**30
#: The smallest height and width a dynamic export is traced at. torch.export
#: (torch 2.13) takes a size derived from the input that is 1 at the example
#: as 1 for every input, without a check that reaches the ONNX graph: traced
#: at 224x224, Twins-SVT's 7x7 last stage is a single LSA window, and the
#: graph fails at inputs with several (e.g. 256x320). At 512 every map of
#: the three families has at least two windows or positions a side.
MIN_DYNAMIC_TRACE_SIZE = 512
INPUT_NAME = 'input'
#: A detector graph's optional second input: the image's (height, width)
#: before padding, int64 (2, ) (see :func:`export_onnx`).
IMG_SHAPE_NAME = 'img_shape'
#: Images ``--int8 static`` calibrates on: as many as the INT8 table of
#: docs/inference.md was measured with.
DEFAULT_CALIBRATION_IMAGES = 64


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Export an mmtnt classifier, segmentor or detector to '
        'ONNX.')
    parser.add_argument('config', help='the config file')
    parser.add_argument(
        'checkpoint',
        nargs='?',
        help='the checkpoint: a file, or mmtnt://NAME[@SOURCE] for '
        'published weights (fetched into the cache, see mmtnt.hub); '
        'without it the weights are randomly initialised (for trying the '
        'export)')
    parser.add_argument(
        '--output-file', required=True, help='the ONNX file to write')
    parser.add_argument(
        '--shape',
        type=int,
        nargs=2,
        required=True,
        metavar=('H', 'W'),
        help='height and width of the input the graph is exported with '
        '(a dynamic export is traced at 512 or more a side, see '
        'MIN_DYNAMIC_TRACE_SIZE)')
    parser.add_argument(
        '--batch-size',
        type=int,
        default=1,
        help='images per input (with --dynamic-export, any batch works); '
        'detectors take 1')
    parser.add_argument(
        '--opset-version',
        type=int,
        default=None,
        help='the ONNX opset; defaults to the exporter\'s default')
    parser.add_argument(
        '--dynamic-export',
        action='store_true',
        help='make batch, height and width dynamic axes (detectors: '
        'height and width, the batch stays 1)')
    parser.add_argument(
        '--logits',
        action='store_true',
        help='classifiers: export the head\'s logits instead of the class '
        'scores (softmax or sigmoid)')
    parser.add_argument(
        '--verify',
        action='store_true',
        help='compare ONNX Runtime with PyTorch on random input (detectors: '
        'with mmdet\'s predict, see the module docstring); exit with '
        'status 1 when they differ by more than allowed (classifiers: '
        'CLS_TOLERANCES, segmentors: --tolerance)')
    parser.add_argument(
        '--verify-shape',
        type=int,
        nargs=2,
        metavar=('H', 'W'),
        help='the second input size --verify checks a dynamic export at; '
        'defaults to one of other remainders than --shape (see '
        'second_shape)')
    parser.add_argument(
        '--verify-image',
        help='detectors: the image --verify resizes to each size (random '
        'pixels without it, which a trained detector may find nothing in)')
    parser.add_argument(
        '--tolerance',
        type=float,
        default=DEFAULT_TOLERANCE,
        help='segmentors: largest relative difference max|onnx - torch| / '
        f'max|torch| accepted by --verify (default {DEFAULT_TOLERANCE})')
    parser.add_argument(
        '--int8',
        choices=['dynamic', 'static'],
        help='also write an INT8 graph for ONNX Runtime on the CPU '
        '(mmtnt.deploy.quantize.quantize_onnx): dynamic (int8 weights, no '
        'data needed) or static (activations calibrated on '
        '--calibration-images images of the training set)')
    parser.add_argument(
        '--int8-file',
        help='the INT8 graph to write; defaults to the output file with '
        '"_int8" before ".onnx"')
    parser.add_argument(
        '--calibration-images',
        type=int,
        default=DEFAULT_CALIBRATION_IMAGES,
        help='--int8 static: training images, through the validation '
        f'pipeline, to calibrate on (default {DEFAULT_CALIBRATION_IMAGES})')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, as key=value pairs')
    return parser.parse_args(argv)


class ClassifierGraph(nn.Module):
    """What is exported of an image classifier: images -> class scores.

    Args:
        classifier (nn.Module): An mmpretrain ``ImageClassifier`` with a
            head.
        logits (bool): Return the head's logits instead of the scores.
            Defaults to False.

    Examples:
        >>> import torch
        >>> from mmengine.config import Config
        >>> cfg = Config.fromfile(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py')
        >>> graph = ClassifierGraph(build_model(cfg)).eval()
        >>> scores = graph(torch.rand(2, 1, 32, 32))
        >>> scores.shape, bool(scores.sum(dim=1).allclose(torch.ones(2)))
        (torch.Size([2, 10]), True)
    """
    output_name = 'scores'

    def __init__(self, classifier, logits=False):
        super().__init__()
        self.classifier = classifier
        self.logits = logits
        if logits:
            self.output_name = 'logits'

    def forward(self, inputs):
        logits = self.classifier(inputs, mode='tensor')
        if self.logits:
            return logits
        from mmpretrain.models.heads import MultiLabelClsHead
        if isinstance(self.classifier.head, MultiLabelClsHead):
            return logits.sigmoid()
        return logits.softmax(dim=-1)


class SegmentorGraph(nn.Module):
    """What is exported of a segmentor: images -> segmentation logits at the
    input resolution (``encode_decode``: the decode head's output resized
    to the input, before soft-max and arg-max).

    Args:
        segmentor (nn.Module): An mmseg ``EncoderDecoder``.

    Examples:
        >>> import torch
        >>> from mmengine.config import Config
        >>> cfg = Config.fromfile('configs/demo/'
        ...     'upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py')
        >>> graph = SegmentorGraph(build_model(cfg)).eval()
        >>> graph(torch.rand(1, 3, 96, 160)).shape
        torch.Size([1, 5, 96, 160])
    """
    output_name = 'seg_logits'

    def __init__(self, segmentor):
        super().__init__()
        self.segmentor = segmentor

    def forward(self, inputs):
        # An img_shape that is a torch.Size is the output size for every
        # mmseg decode head; under torch.export its sizes stay symbolic.
        img_metas = [dict(img_shape=inputs.shape[2:])]
        return self.segmentor.encode_decode(inputs, img_metas)


def build_model(cfg, checkpoint=None):
    """Build the classifier, segmentor or detector of a config, with its
    weights.

    Args:
        cfg (Config): An mmtnt (or mmpretrain / mmseg / mmdet) config.
        checkpoint (str, optional): The weights: a file, or
            ``mmtnt://NAME[@SOURCE]`` (fetched into the cache by
            :func:`mmtnt.hub.prepare_checkpoint`); None initialises them
            at random (a warning is logged).

    Returns:
        nn.Module: The model in eval mode, on the CPU, SyncBN layers
        replaced by BatchNorm.

    Raises:
        ValueError: For models other than an image classifier with a head,
            an ``EncoderDecoder`` and the detectors of
            :func:`mmtnt.deploy.detection.check_detector`.
        CheckpointFileError: If ``checkpoint`` is a file that is missing
            or no checkpoint (a ValueError).
        HubError: If published weights cannot be fetched.
    """
    scope = cfg.get('default_scope')
    if scope not in ('mmpretrain', 'mmseg', 'mmdet'):
        raise ValueError(
            f"The config's default_scope must be 'mmpretrain' (classifiers), "
            f"'mmseg' (segmentors) or 'mmdet' (detectors), got {scope!r}.")
    prepare_checkpoint(checkpoint)
    init_default_scope(scope)
    model_cfg = cfg.model.copy()
    # As mmengine's Runner: a top-level data_preprocessor is the model's.
    if cfg.get('data_preprocessor') is not None:
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    model = MODELS.build(model_cfg)
    check_model_type(model)
    if checkpoint is None:
        print_log(
            'Warning: no checkpoint given, the weights are randomly '
            'initialised.',
            logger='current',
            level=logging.WARNING)
        # Without the log of every initialised parameter.
        logger = MMLogger.get_current_instance()
        level = logger.level
        logger.setLevel(logging.WARNING)
        try:
            model.init_weights()
        finally:
            logger.setLevel(level)
    else:
        register_checkpoint_safe_globals()
        load_checkpoint(model, checkpoint, map_location='cpu')
    return revert_sync_batchnorm(model).eval()


def is_detector(model):
    """Whether ``model`` is an mmdet detector."""
    from mmdet.models.detectors import BaseDetector
    return isinstance(model, BaseDetector)


def check_model_type(model):
    """Raise a ValueError unless ``model`` is an image classifier with a
    head, an mmseg ``EncoderDecoder`` or a detector that
    :class:`mmtnt.deploy.DetectorGraph` exports."""
    from mmpretrain.models import ImageClassifier
    from mmseg.models.segmentors import EncoderDecoder
    if isinstance(model, ImageClassifier) and model.with_head:
        return
    if isinstance(model, EncoderDecoder):
        return
    if is_detector(model):
        from mmtnt.deploy.detection import check_detector
        check_detector(model)
        return
    raise ValueError(
        f'Cannot export a {type(model).__name__}: this tool exports image '
        'classifiers with a head (mmpretrain ImageClassifier), '
        'segmentors (mmseg EncoderDecoder) and mmdet detectors.')


def export_graph(model, logits=False):
    """The module that is exported for a model (see the module docstring).

    Args:
        model (nn.Module): A model from :func:`build_model`.
        logits (bool): Classifiers: the logits instead of the scores.

    Returns:
        ClassifierGraph | SegmentorGraph | DetectorGraph: In eval mode.
    """
    from mmpretrain.models import ImageClassifier
    if isinstance(model, ImageClassifier):
        return ClassifierGraph(model, logits=logits).eval()
    if is_detector(model):
        return DetectorGraph(model).eval()
    return SegmentorGraph(model).eval()


class AdaptiveAvgPool2dGraph(nn.Module):
    """``nn.AdaptiveAvgPool2d`` as two products with averaging matrices,
    built from the input size inside the graph.

    PyTorch's decomposition of adaptive average pooling for the ONNX exporter
    takes the pooling windows of the example input as constants, so an
    exported graph would pool a map of another size wrongly (mmseg's
    pyramid pooling in UPerHead and PSPHead). Window ``i`` of ``s`` over
    ``n`` positions is ``[floor(i * n / s), ceil((i + 1) * n / s))``, as in
    PyTorch.

    Args:
        output_size (int | tuple[int | None, int | None]): As for
            ``nn.AdaptiveAvgPool2d`` (None keeps the input's size).

    Examples:
        >>> import torch
        >>> x = torch.rand(2, 4, 13, 7)
        >>> pool = AdaptiveAvgPool2dGraph((3, 2))
        >>> torch.allclose(pool(x), nn.AdaptiveAvgPool2d((3, 2))(x))
        True
    """

    def __init__(self, output_size):
        super().__init__()
        if isinstance(output_size, int):
            output_size = (output_size, output_size)
        self.output_size = tuple(output_size)

    @staticmethod
    def averaging_matrix(in_size, out_size, x):
        """(out_size, in_size) weights averaging each window, in the dtype
        and on the device of ``x``."""
        i = torch.arange(out_size, device=x.device)
        start = torch.div(i * in_size, out_size, rounding_mode='floor')
        end = torch.div((i + 1) * in_size + out_size - 1, out_size,
                        rounding_mode='floor')
        j = torch.arange(in_size, device=x.device)
        inside = (j[None] >= start[:, None]) & (j[None] < end[:, None])
        return inside.to(x.dtype) / (end - start)[:, None].to(x.dtype)

    def forward(self, x):
        height, width = x.shape[-2:]
        out_h, out_w = (size if out is None else out
                        for out, size in zip(self.output_size, (height,
                                                                width)))
        rows = self.averaging_matrix(height, out_h, x)
        cols = self.averaging_matrix(width, out_w, x)
        return rows @ x @ cols.transpose(0, 1)


@contextlib.contextmanager
def export_friendly(module):
    """Within the block, the adaptive average poolings of ``module`` that
    do not pool to 1x1 are :class:`AdaptiveAvgPool2dGraph`; they are put
    back afterwards.

    Args:
        module (nn.Module): Changed in place for the block.
    """
    swapped = []
    for parent in module.modules():
        for name, child in parent.named_children():
            if (isinstance(child, nn.AdaptiveAvgPool2d)
                    and child.output_size not in (1, (1, 1))):
                swapped.append((parent, name, child))
                setattr(parent, name,
                        AdaptiveAvgPool2dGraph(child.output_size))
    try:
        yield module
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)


def input_channels(model):
    """The image channels the model takes: those its data preprocessor
    normalises, else 3."""
    mean = getattr(model.data_preprocessor, 'mean', None)
    return 3 if mean is None else int(mean.shape[0])


def channels_reversed(preprocessor):
    """Whether a data preprocessor reverses the channels (BGR to RGB):
    mmpretrain's ``to_rgb``, mmseg's ``bgr_to_rgb`` (or ``rgb_to_bgr``),
    mmengine's and mmdet's ``_channel_conversion``."""
    return any(
        getattr(preprocessor, name, False)
        for name in ('to_rgb', 'channel_conversion', '_channel_conversion'))


def describe_preprocessing(model):
    """One line saying how the graph's input must be normalised."""
    preprocessor = model.data_preprocessor
    mean = getattr(preprocessor, 'mean', None)
    if mean is None:
        return 'The graph takes the image unnormalised.'
    mean = [round(float(v), 3) for v in mean.flatten()]
    std = [round(float(v), 3) for v in preprocessor.std.flatten()]
    order = ('reversed from the order images are loaded in (BGR to RGB)'
             if channels_reversed(preprocessor) else
             'in the order images are loaded in')
    return (f'The graph takes (img - mean) / std, mean={mean}, std={std}, '
            f'channels {order}.')


def check_input_size(graph, channels, shape):
    """Run the model once at ``shape``, turning a size it refuses into a
    clear ValueError.

    Args:
        graph (nn.Module): From :func:`export_graph`.
        channels (int): Image channels.
        shape (tuple[int, int]): Height and width.
    """
    height, width = shape
    if height < 1 or width < 1:
        raise ValueError(f'--shape must be positive, got {height}x{width}.')
    try:
        with torch.no_grad():
            graph(torch.zeros(1, channels, height, width))
    except (ValueError, RuntimeError) as error:
        raise ValueError(
            f'The model cannot take a {height}x{width} input (too small?): '
            f'{error}') from error


def second_shape(height, width):
    """The size a dynamic export is checked at besides ``--shape``: about
    1.25x the height and 1.5x the width, both odd, so that its remainders
    by every stride, patch and window size differ from those of a size
    made of multiples of 32 (other paddings and masks).

    Examples:
        >>> second_shape(224, 224)
        (287, 339)
    """
    return height + height // 4 + 7, width + width // 2 + 3


def export_onnx(graph,
                output_file,
                shape,
                channels=3,
                batch_size=1,
                opset_version=None,
                dynamic=False):
    """Export ``graph`` to an ONNX file.

    Args:
        graph (nn.Module): From :func:`export_graph`.
        output_file (str): The ONNX file.
        shape (tuple[int, int]): Height and width of the example input
            (a dynamic export traces at :func:`dynamic_trace_shape`).
        channels (int): Image channels. Defaults to 3.
        batch_size (int): Images of the example input (a dynamic export
            traces at least 2, as a batch of 1 would be taken as a
            constant). Defaults to 1. A detector's is 1.
        opset_version (int, optional): The ONNX opset. Defaults to the
            exporter's.
        dynamic (bool): Batch, height and width as dynamic axes (for a
            :class:`DetectorGraph`, height and width). Defaults to False.

    Returns:
        dict: For a dynamic export, the range ``(low, high)`` of ``batch``,
        ``height`` and ``width`` the graph was exported for (``high`` None
        when unbounded); empty otherwise.

    A :class:`DetectorGraph` has a second input, :data:`IMG_SHAPE_NAME`:
    the image's height and width before padding, int64 (2, ). It is
    optional: the graph stores a default (:data:`UNPADDED`, which stands
    for the input's size) as an initializer of the same name, which ONNX
    Runtime uses when it is not fed, so that one-input callers keep
    working. (ONNX Runtime lists it among the session's
    ``get_overridable_initializers()``, not ``get_inputs()``.)
    """
    from torch.export import Dim
    detector = isinstance(graph, DetectorGraph)
    if dynamic:
        axes = {2: Dim.DYNAMIC, 3: Dim.DYNAMIC}
        if not detector:
            batch_size = max(batch_size, 2)
            axes[0] = Dim.DYNAMIC
        dynamic_shapes = (axes, None) if detector else (axes, )
        shape = dynamic_trace_shape(shape)
    else:
        dynamic_shapes = None
    example = (torch.randn(batch_size, channels, *shape), )
    if detector:
        example += (torch.tensor(shape), )
    with torch.no_grad(), export_friendly(graph):
        program = torch.export.export(
            graph, example, dynamic_shapes=dynamic_shapes, strict=False)
    onnx_program = torch.onnx.export(
        program,
        example,
        dynamo=True,
        input_names=[INPUT_NAME, IMG_SHAPE_NAME][:len(example)],
        output_names=output_names(graph),
        opset_version=opset_version,
        verbose=False)
    if detector:
        default_img_shape(onnx_program.model.graph)
    weight_bytes = sum(p.numel() * p.element_size()
                       for p in graph.parameters())
    out_dir = osp.dirname(osp.abspath(output_file))
    os.makedirs(out_dir, exist_ok=True)
    onnx_program.save(
        output_file,
        external_data=weight_bytes > MAX_EMBEDDED_WEIGHT_BYTES)
    return dynamic_ranges(program) if dynamic else {}


def default_img_shape(onnx_graph):
    """Make a detector graph's :data:`IMG_SHAPE_NAME` input optional: an
    initializer of that name holds :data:`UNPADDED`.

    Args:
        onnx_graph (onnx_ir.Graph): The exported graph, changed in place.
    """
    import onnx_ir as ir
    value = next(v for v in onnx_graph.inputs if v.name == IMG_SHAPE_NAME)
    value.const_value = ir.tensor(np.array(UNPADDED, dtype=np.int64),
                                  name=IMG_SHAPE_NAME)
    onnx_graph.register_initializer(value)


def output_names(graph):
    """The names of the outputs of a graph from :func:`export_graph`."""
    if isinstance(graph, DetectorGraph):
        return list(graph.output_names)
    return [graph.output_name]


def dynamic_trace_shape(shape):
    """The example size a dynamic export is traced at: ``shape``, each side
    at least :data:`MIN_DYNAMIC_TRACE_SIZE`.

    Examples:
        >>> dynamic_trace_shape((224, 640))
        (512, 640)
    """
    return tuple(max(size, MIN_DYNAMIC_TRACE_SIZE) for size in shape)


def dynamic_ranges(program):
    """The range of each dynamic input axis of an exported program.

    Args:
        program (torch.export.ExportedProgram): With one image input.

    Returns:
        dict: ``batch``, ``height``, ``width`` -> ``(low, high)``, ``high``
        None when unbounded.
    """
    name = program.graph_signature.user_inputs[0]
    node = next(n for n in program.graph.nodes if n.name == name)
    ranges = {}
    for axis, dim in (('batch', 0), ('height', 2), ('width', 3)):
        size = node.meta['val'].shape[dim]
        if not isinstance(size, torch.SymInt):
            ranges[axis] = (int(size), int(size))
            continue
        value_range = program.range_constraints.get(size.node.expr)
        if value_range is None:
            ranges[axis] = (1, None)
            continue
        upper = value_range.upper
        ranges[axis] = (int(value_range.lower),
                        int(upper) if upper.is_Integer else None)
    return ranges


def relative_difference(actual, expected):
    """``max|actual - expected| / max|expected|`` (0 for two zero arrays).

    Examples:
        >>> import numpy as np
        >>> relative_difference(np.array([1., 2.]), np.array([1., 4.]))
        0.5
    """
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    if actual.shape != expected.shape:
        raise ValueError(f'ONNX Runtime returned shape {actual.shape}, '
                         f'PyTorch {expected.shape}.')
    scale = np.abs(expected).max()
    error = np.abs(actual - expected).max()
    return float(error / scale) if scale > 0 else float(error)


def worst_element(actual, expected, rtol, atol):
    """The element of ``actual`` farthest outside ``atol + rtol *
    |expected|`` of ``expected`` (a NaN is the farthest).

    Args:
        actual (np.ndarray): ONNX Runtime's output.
        expected (np.ndarray): PyTorch's, of the same shape.
        rtol (float): Allowed difference, relative to ``|expected|``.
        atol (float): Allowed absolute difference.

    Returns:
        dict: ``index`` (a tuple), ``actual`` and ``expected`` (the values
        there), ``ratio`` (their difference over what is allowed there:
        above 1, or NaN, it is outside), ``rtol`` and ``atol``.

    Examples:
        >>> worst = worst_element(np.array([.5, 4e-5]),
        ...                       np.array([.5, 5e-6]), 1e-3, 1e-12)
        >>> worst['index'], worst['ratio'] > 1
        ((1,), True)
    """
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    ratio = np.abs(actual - expected) / (atol + rtol * np.abs(expected))
    index = np.unravel_index(np.argmax(ratio), ratio.shape)
    return dict(
        index=tuple(int(i) for i in index),
        actual=float(actual[index]),
        expected=float(expected[index]),
        ratio=float(ratio[index]),
        rtol=rtol,
        atol=atol)


def cpu_session(onnx_file, num_threads=None):
    """An ONNX Runtime session on the CPU, with ``num_threads`` intra-op
    threads (ONNX Runtime's default when None)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    if num_threads is not None:
        options.intra_op_num_threads = num_threads
    return ort.InferenceSession(
        onnx_file, options, providers=['CPUExecutionProvider'])


def verify_onnx(output_file, graph, checks, channels=3, seed=0,
                num_threads=None):
    """Run the ONNX graph with ONNX Runtime (CPU) and PyTorch on the same
    random inputs.

    Args:
        output_file (str): The ONNX file.
        graph (nn.Module): The exported module.
        checks (list[tuple[int, int, int]]): ``(batch, height, width)`` of
            each input.
        channels (int): Image channels. Defaults to 3.
        seed (int): Seed of the standard-normal inputs. Defaults to 0.
        num_threads (int, optional): ONNX Runtime's intra-op threads.

    Returns:
        list[dict]: Per check: ``shape`` (the input's), ``max_abs``
        (``max|onnx - torch|``), ``relative`` (that over ``max|torch|``),
        both infinite when ONNX Runtime failed or returned another shape,
        ``error`` (that exception, else None) and, for a
        :class:`ClassifierGraph`, ``worst``: its element farthest from
        PyTorch's, by :data:`CLS_TOLERANCES` (:func:`worst_element`; None
        after an error).
    """
    session = cpu_session(output_file, num_threads)
    generator = torch.Generator().manual_seed(seed)
    tolerances = (CLS_TOLERANCES[graph.output_name] if isinstance(
        graph, ClassifierGraph) else None)
    results = []
    for batch, height, width in checks:
        inputs = torch.randn(
            batch, channels, height, width, generator=generator)
        with torch.no_grad():
            expected = graph(inputs).numpy()
        result = dict(shape=tuple(inputs.shape), error=None)
        if tolerances is not None:
            result['worst'] = None
        try:
            actual = session.run(None, {INPUT_NAME: inputs.numpy()})[0]
            result.update(
                max_abs=float(
                    np.abs(actual.astype(np.float64) - expected).max()),
                relative=relative_difference(actual, expected))
            if tolerances is not None:
                result['worst'] = worst_element(actual, expected,
                                                *tolerances)
        except Exception as error:  # ONNX Runtime's or a shape mismatch
            result.update(
                max_abs=float('inf'), relative=float('inf'), error=error)
        results.append(result)
    return results


def detector_shapes(shape, verify_shape=None):
    """The input sizes ``--verify`` checks a dynamic detector export at:
    ``shape``, ``verify_shape`` (default :func:`second_shape`) and one
    smaller than ``shape`` in height and larger in width, both odd.

    Examples:
        >>> detector_shapes((128, 128))
        [(128, 128), (167, 195), (97, 165)]
    """
    height, width = shape
    second = tuple(verify_shape or second_shape(height, width))
    third = (height - height // 4 + 1, width + width // 4 + 5)
    return [tuple(shape), second, third]


def padded_check(model, shape, dynamic):
    """The image size and padded input size of ``--verify``'s check of a
    padded input, as mmdet's ``DetDataPreprocessor`` pads at the model's
    ``pad_size_divisor``.

    A dynamic graph gets an image of ``shape`` padded to the next multiple
    of the divisor; a static one its input size ``shape``, holding an image
    half a divisor smaller.

    Args:
        model (nn.Module): The detector.
        shape (tuple[int, int]): Height and width.
        dynamic (bool): Whether the graph takes other sizes.

    Returns:
        tuple | None: ``(img_shape, pad_shape)``; None when the
        preprocessor does not pad.

    Examples:
        >>> padded_check(model, (97, 165), True)  # pad_size_divisor=32
        ((97, 165), (128, 192))
    """
    divisor = getattr(model.data_preprocessor, 'pad_size_divisor', 1)
    if divisor <= 1:
        return None
    if not dynamic:
        return tuple(size - divisor // 2 for size in shape), tuple(shape)
    return tuple(shape), tuple(ceil_div(size, divisor) * divisor
                               for size in shape)


def pad_input(inputs, pad_shape):
    """Pad a preprocessed input (1, C, h, w) with zeros at the bottom and
    right to ``pad_shape``, as mmengine's ``stack_batch`` does after the
    normalisation (``pad_value`` 0).

    Examples:
        >>> pad_input(torch.ones(1, 3, 5, 6), (8, 8)).shape
        torch.Size([1, 3, 8, 8])
    """
    height, width = inputs.shape[2:]
    return torch.nn.functional.pad(
        inputs, (0, pad_shape[1] - width, 0, pad_shape[0] - height))


def detector_input(model, shape, image=None, seed=0):
    """A preprocessed input (1, C, H, W) for a detector: ``image`` resized
    to ``shape`` (random pixels without it), its channels reversed and
    normalised as the model's data preprocessor does (without padding).

    Args:
        model (nn.Module): The detector.
        shape (tuple[int, int]): Height and width.
        image (np.ndarray, optional): (h, w, C) uint8, in the order images
            are loaded in (BGR).
        seed (int): Seed of the random pixels. Defaults to 0.

    Returns:
        Tensor: float32.
    """
    import mmcv
    height, width = shape
    if image is None:
        rng = np.random.default_rng(seed)
        image = rng.integers(0, 256, (height, width, input_channels(model)))
    else:
        image = mmcv.imresize(image, (width, height))
    inputs = torch.from_numpy(np.ascontiguousarray(image)).float()
    inputs = inputs.permute(2, 0, 1)[None]
    preprocessor = model.data_preprocessor
    if channels_reversed(preprocessor):
        inputs = inputs.flip(1)
    if getattr(preprocessor, 'mean', None) is not None:
        inputs = (inputs - preprocessor.mean) / preprocessor.std
    return inputs


def eager_detections(model, inputs, img_shape=None):
    """mmdet's own ``predict(inputs, rescale=False)`` of one image.

    Args:
        model (nn.Module): The detector.
        inputs (Tensor): (1, C, H, W), the batch input.
        img_shape (tuple[int, int], optional): The image's size within
            the padded ``inputs`` (its ``img_shape`` and ``ori_shape``;
            ``pad_shape`` is (H, W)). Defaults to (H, W).

    Returns:
        dict: ``boxes``, ``scores``, ``labels`` and (Mask R-CNN)
        ``masks`` as numpy arrays.
    """
    from mmdet.structures import DetDataSample
    size = tuple(inputs.shape[2:])
    img_shape = size if img_shape is None else tuple(img_shape)
    sample = DetDataSample(
        metainfo=dict(
            img_shape=img_shape,
            ori_shape=img_shape,
            pad_shape=size,
            batch_input_shape=size,
            scale_factor=(1., 1.)))
    with torch.no_grad():
        found = model.predict(inputs, [sample], rescale=False)[0]
    found = found.pred_instances
    results = dict(
        boxes=found.bboxes.numpy(),
        scores=found.scores.numpy(),
        labels=found.labels.numpy())
    if 'masks' in found:
        results['masks'] = found.masks.numpy()
    return results


def tie_groups(scores, tolerance):
    """Runs of detections, sorted by decreasing score, whose neighbours'
    scores differ by at most ``tolerance``: those that may come in another
    order.

    Examples:
        >>> tie_groups(np.array([.9, .5, .49995, .4999, .1]), 1e-4)
        [(0, 1), (1, 4), (4, 5)]
    """
    groups, start = [], 0
    for i in range(1, len(scores) + 1):
        if i == len(scores) or scores[i - 1] - scores[i] > tolerance:
            groups.append((start, i))
            start = i
    return groups


def mask_iou(mask, other):
    """IoU of two masks, binary or probabilities (at 0.5); 1 for two empty
    ones."""
    mask, other = np.asarray(mask) >= 0.5, np.asarray(other) >= 0.5
    union = np.logical_or(mask, other).sum()
    return float(np.logical_and(mask, other).sum() / union) if union else 1.


def pair_differences(actual, expected, i, j):
    """Box and score differences and mask IoU of detection ``i`` of
    ``actual`` and ``j`` of ``expected``; None if their labels differ."""
    if actual['labels'][i] != expected['labels'][j]:
        return None
    box = float(np.abs(actual['boxes'][i] - expected['boxes'][j]).max())
    score = float(abs(actual['scores'][i] - expected['scores'][j]))
    iou = (mask_iou(actual['masks'][i], expected['masks'][j])
           if 'masks' in expected else 1.)
    return box, score, iou


def match_detections(actual, expected, max_side,
                     box_tolerance=DET_BOX_TOLERANCE,
                     score_tolerance=DET_SCORE_TOLERANCE,
                     min_mask_iou=DET_MASK_IOU):
    """Match an exported detector's detections with mmdet's.

    Detections are matched in order; within a run of near-equal scores
    (:func:`tie_groups`) that does not match in order, as a set, and the
    detections whose place changed are counted as ``reordered``.

    Args:
        actual (dict): ``boxes``, ``scores``, ``labels`` (``masks``), numpy.
        expected (dict): The same, from mmdet.
        max_side (int): The input's longer side; box differences are
            measured against ``box_tolerance * max_side``.
        box_tolerance (float): Fraction of ``max_side``.
        score_tolerance (float): Largest score difference.
        min_mask_iou (float): Smallest IoU of matched masks.

    Returns:
        dict: ``count`` and ``expected_count``, ``max_box`` (pixels),
        ``max_score``, ``min_mask_iou`` (None without masks), ``reordered``
        and ``error`` (None when all matched, else why not).

    Examples:
        >>> det = dict(boxes=np.array([[0., 0, 9, 9], [1, 1, 5, 5]]),
        ...            scores=np.array([.5, .5]), labels=np.array([1, 2]))
        >>> swapped = {k: v[::-1] for k, v in det.items()}
        >>> result = match_detections(swapped, det, 10)
        >>> result['reordered'], result['error']
        (2, None)
    """
    result = dict(
        count=len(actual['scores']),
        expected_count=len(expected['scores']),
        max_box=0.,
        max_score=0.,
        min_mask_iou=1. if 'masks' in expected else None,
        reordered=0,
        error=None)
    if result['count'] != result['expected_count']:
        result['error'] = (f'{result["count"]} detections, mmdet '
                           f'{result["expected_count"]}')
        return result
    limits = (box_tolerance * max_side, score_tolerance, min_mask_iou)

    def close(diffs):
        return diffs is not None and (diffs[0] <= limits[0]
                                      and diffs[1] <= limits[1]
                                      and diffs[2] >= limits[2])

    pairs = []
    for start, end in tie_groups(expected['scores'], score_tolerance):
        group = [(j, pair_differences(actual, expected, j, j))
                 for j in range(start, end)]
        if not all(close(diffs) for _, diffs in group):
            unmatched = list(range(start, end))
            group = []
            for j in range(start, end):
                found = [(i, pair_differences(actual, expected, i, j))
                         for i in unmatched]
                found = [(i, d) for i, d in found if close(d)]
                if not found:
                    result['error'] = (
                        f'mmdet\'s detection {j} (label '
                        f'{expected["labels"][j]}, score '
                        f'{expected["scores"][j]:.6f}) has no counterpart')
                    found = [(j, pair_differences(actual, expected, j, j))]
                i, diffs = found[0]
                if i in unmatched:
                    unmatched.remove(i)
                result['reordered'] += i != j
                group.append((j, diffs))
        pairs += [diffs for _, diffs in group if diffs is not None]
    if pairs:
        box, score, iou = np.array(pairs).T
        result.update(max_box=float(box.max()), max_score=float(score.max()))
        if 'masks' in expected:
            result['min_mask_iou'] = float(iou.min())
    return result


def verify_detector_onnx(output_file, graph, shapes, image=None, seed=0,
                         num_threads=None, padded=None):
    """Run the ONNX graph of a detector with ONNX Runtime (CPU) and mmdet's
    eager ``predict`` on the same inputs, and match their detections
    (:func:`match_detections`).

    Args:
        output_file (str): The ONNX file.
        graph (DetectorGraph): The exported module (its detector is run).
        shapes (list[tuple[int, int]]): Height and width of each input,
            run without :data:`IMG_SHAPE_NAME` (the graph's default).
        image (np.ndarray, optional): The image resized to each size
            (:func:`detector_input`).
        seed (int): Seed of the random pixels without ``image``.
        num_threads (int, optional): ONNX Runtime's intra-op threads.
        padded (tuple, optional): ``(img_shape, pad_shape)`` of one more
            check (:func:`padded_check`): the image resized to
            ``img_shape``, padded to ``pad_shape`` (:func:`pad_input`)
            and its ``img_shape`` fed.

    Returns:
        list[dict]: Per check, that of :func:`match_detections` with
        ``shape`` (the input's) and ``img_shape`` added; an ONNX Runtime
        failure is the ``error``.
    """
    session = cpu_session(output_file, num_threads)
    model = graph.detector
    checks = [(detector_input(model, shape, image, seed), None)
              for shape in shapes]
    if padded is not None:
        img_shape, pad_shape = padded
        inputs = detector_input(model, img_shape, image, seed)
        checks.append((pad_input(inputs, pad_shape), img_shape))
    return [check_detector_onnx(session, graph, inputs, img_shape)
            for inputs, img_shape in checks]


def check_detector_onnx(session, graph, inputs, img_shape=None):
    """One check of :func:`verify_detector_onnx`.

    Args:
        session (onnxruntime.InferenceSession): Runs the graph.
        graph (DetectorGraph): The exported module.
        inputs (Tensor): (1, C, H, W), maybe padded.
        img_shape (tuple[int, int], optional): The image's size in
            ``inputs``, fed as :data:`IMG_SHAPE_NAME`; not fed when None.

    Returns:
        dict: See :func:`verify_detector_onnx`.
    """
    size = dict(shape=tuple(inputs.shape),
                img_shape=tuple(img_shape or inputs.shape[2:]))
    expected = eager_detections(graph.detector, inputs, img_shape)
    feed = {INPUT_NAME: inputs.numpy()}
    if img_shape is not None:
        feed[IMG_SHAPE_NAME] = np.array(img_shape, dtype=np.int64)
    try:
        outputs = session.run(None, feed)
    except Exception as error:  # ONNX Runtime's
        return dict(size, error=error)
    actual = dict(zip(graph.output_names, outputs))
    return dict(match_detections(actual, expected, max(size['shape'][2:])),
                **size)


def describe_detector_check(result):
    """One line on a check of :func:`verify_detector_onnx`."""
    head = f'Verify {result["shape"]}: '
    if result['img_shape'] != result['shape'][2:]:
        head = (f'Verify {result["shape"]}, image {result["img_shape"]} '
                'padded: ')
    if 'count' not in result:
        return head + f'FAILED, {result["error"]}'
    line = (f'{result["count"]} detections (mmdet {result["expected_count"]})'
            f', max box diff {result["max_box"]:.3g} px (tolerance '
            f'{DET_BOX_TOLERANCE:g} x {max(result["shape"][2:])}), max '
            f'score diff {result["max_score"]:.3g} (tolerance '
            f'{DET_SCORE_TOLERANCE:g})')
    if result['min_mask_iou'] is not None:
        line += f', min mask IoU {result["min_mask_iou"]:.4f}'
    line += (f', {result["reordered"]} detections of near-equal scores '
             'in another order')
    if result['error'] is not None:
        return head + line + f': FAILED, {result["error"]}'
    return head + line + ': OK'


def format_range(low, high):
    return f'[{low}, {"inf" if high is None else high}]'


def load_config(args):
    """The config with ``--cfg-options`` merged."""
    cfg = Config.fromfile(args.config)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    return cfg


def int8_file(args):
    """Where ``--int8`` writes: ``--int8-file``, else the output file with
    ``_int8`` before its extension.

    Examples:
        >>> int8_file(parse_args(['c.py', '--output-file', 'svt.onnx',
        ...                       '--shape', '224', '224', '--int8',
        ...                       'dynamic']))
        'svt_int8.onnx'
    """
    if args.int8_file:
        return args.int8_file
    root, ext = osp.splitext(args.output_file)
    return f'{root}_int8{ext or ".onnx"}'


def write_int8(args):
    """Quantize the exported graph as ``--int8`` asks and say where it is.
    """
    from mmtnt.deploy.quantize import calibration_inputs, quantize_onnx
    calibration = None
    if args.int8 == 'static':
        calibration = calibration_inputs(
            load_config(args), args.calibration_images, split='train')
    output_file = int8_file(args)
    quantize_onnx(args.output_file, output_file, args.int8, calibration)
    detail = ('7-bit int8 weights, activations quantized at run time'
              if args.int8 == 'dynamic' else
              f'calibrated on {len(calibration)} training images')
    print(f'Wrote the INT8 graph ({args.int8}: {detail}) to {output_file}; '
          'docs/inference.md says which layers stay fp32.')


def load_model(args):
    """The config's model with the checkpoint's weights; SystemExit with
    the reason when that fails."""
    if args.batch_size < 1:
        raise SystemExit('Error: --batch-size must be at least 1.')
    if args.int8 is not None and args.calibration_images < 1:
        raise SystemExit('Error: --calibration-images must be at least 1.')
    cfg = load_config(args)
    try:
        model = build_model(cfg, args.checkpoint)
    except (ValueError, HubError) as error:
        raise SystemExit(f'Error: {error}')
    if is_detector(model) and args.batch_size != 1:
        raise SystemExit('Error: detectors are exported for one image: '
                         '--batch-size must be 1.')
    return model


def verify_checks(args, model):
    """``(batch, height, width)`` of each input that ``--verify`` checks:
    ``--shape``, and with ``--dynamic-export`` one more (classifiers and
    segmentors, another batch) or two more (detectors, see
    :func:`detector_shapes`). A detector's padded check is added by
    :func:`verify_detector` (:func:`padded_check`)."""
    shape = tuple(args.shape)
    if not (args.verify and args.dynamic_export):
        return [(args.batch_size, *shape)]
    if is_detector(model):
        return [(1, *size)
                for size in detector_shapes(shape, args.verify_shape)]
    other = tuple(args.verify_shape or second_shape(*shape))
    return [(args.batch_size, *shape), (args.batch_size + 1, *other)]


def report_export(args, model, graph, channels, ranges):
    """Print what was exported: inputs, outputs, normalisation, axes."""
    batch = 1 if is_detector(model) else 'N'
    names = ', '.join(repr(name) for name in output_names(graph))
    optional = (f' (and optional {IMG_SHAPE_NAME!r} (2, ) int64, the '
                'height and width before padding)'
                if is_detector(model) else '')
    print(f'Exported {type(model).__name__} to {args.output_file}: input '
          f'{INPUT_NAME!r} ({batch}, {channels}, H, W){optional}, '
          f'output{"s" if ", " in names else ""} {names}.')
    print(describe_preprocessing(model))
    if not ranges:
        print(f'Static input shape ({args.batch_size}, {channels}, '
              f'{args.shape[0]}, {args.shape[1]}).')
        return
    axes = ('height and width (the batch is 1: detectors take one image)'
            if is_detector(model) else 'batch, height and width')
    print(f'Dynamic axes: {axes} (torch.export checked the graph for ' +
          ', '.join(f'{axis} {format_range(*r)}'
                    for axis, r in ranges.items()) +
          '; sizes below those bounds are not excluded, only not checked '
          'by the tracer).')


def describe_classifier_check(result, output_name):
    """One line on a classifier's check of :func:`verify_onnx`, and
    whether it passed.

    Args:
        result (dict): One check, with ``worst``.
        output_name (str): ``'scores'`` or ``'logits'``.

    Returns:
        tuple[str, bool]: The line and whether every output was within
        its tolerance.
    """
    worst = result['worst']
    ok = worst['ratio'] <= 1
    image, label = worst['index']
    line = (f'Verify {result["shape"]}: max abs diff '
            f'{result["max_abs"]:.3g}; {output_name} elementwise, |onnx - '
            f'torch| <= {worst["atol"]:.3g} + {worst["rtol"]:g} x |torch|: '
            f'the farthest, class {label} of image {image} (onnx '
            f'{worst["actual"]:.6g}, torch {worst["expected"]:.6g}), is at '
            f'{worst["ratio"]:.3g}x the allowed difference')
    return line + (': OK' if ok else ': FAILED'), ok


def describe_segmentor_check(result, tolerance):
    """One line on a segmentor's check of :func:`verify_onnx`, and
    whether its relative difference is within ``tolerance``."""
    ok = result['relative'] <= tolerance
    return (f'Verify {result["shape"]}: max abs diff '
            f'{result["max_abs"]:.3g}, relative diff '
            f'{result["relative"]:.3g} (max|onnx - torch| / max|torch|, '
            f'tolerance {tolerance:g}): {"OK" if ok else "FAILED"}'), ok


def verify_dense(args, graph, checks, channels):
    """``--verify`` of a classifier (:data:`CLS_TOLERANCES`) or a
    segmentor (``--tolerance``): print each check; whether all passed."""
    passed = True
    for result in verify_onnx(args.output_file, graph, checks, channels):
        if result['error'] is not None:
            line = f'Verify {result["shape"]}: FAILED, {result["error"]}'
            ok = False
        elif isinstance(graph, ClassifierGraph):
            line, ok = describe_classifier_check(result, graph.output_name)
        else:
            line, ok = describe_segmentor_check(result, args.tolerance)
        passed &= ok
        print(line)
    return passed


def verify_detector(args, graph, checks):
    """``--verify`` of a detector against mmdet's ``predict``: print each
    check; whether all passed."""
    image = None
    if args.verify_image is not None:
        import mmcv
        image = mmcv.imread(args.verify_image)
        if image is None:
            raise SystemExit(f'Error: cannot read {args.verify_image}.')
    shapes = [check[1:] for check in checks]
    padded = padded_check(graph.detector, shapes[-1], args.dynamic_export)
    passed = True
    for result in verify_detector_onnx(args.output_file, graph, shapes,
                                       image, padded=padded):
        passed &= result['error'] is None
        print(describe_detector_check(result))
    return passed


def main(argv=None):
    args = parse_args(argv)
    model = load_model(args)
    graph = export_graph(model, logits=args.logits)
    channels = input_channels(model)
    checks = verify_checks(args, model)
    try:
        for _, height, width in checks:
            check_input_size(graph, channels, (height, width))
    except ValueError as error:
        raise SystemExit(f'Error: {error}')

    ranges = export_onnx(
        graph,
        args.output_file,
        tuple(args.shape),
        channels=channels,
        batch_size=args.batch_size,
        opset_version=args.opset_version,
        dynamic=args.dynamic_export)
    report_export(args, model, graph, channels, ranges)
    if args.int8 is not None:
        write_int8(args)
    if not args.verify:
        return
    if isinstance(graph, DetectorGraph):
        passed = verify_detector(args, graph, checks)
    else:
        passed = verify_dense(args, graph, checks, channels)
    if not passed:
        print('Error: ONNX Runtime and PyTorch disagree.', file=sys.stderr)
        raise SystemExit(1)


if __name__ == '__main__':
    main()
