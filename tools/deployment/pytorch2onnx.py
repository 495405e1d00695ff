"""Export an mmtnt classifier or segmentor to ONNX, and check the graph with
ONNX Runtime.

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
  graph.

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
batch, and compares with PyTorch: the relative difference
``max|onnx - torch| / max|torch|`` must not exceed ``--tolerance``.

Detectors are not exported: their post-processing (RoI Align, NMS) needs
custom ONNX operators; MMDeploy covers them for mmdet models.

Examples::

    python tools/deployment/pytorch2onnx.py \\
        configs/twins/twins-svt-small_8xb128_in1k.py svt-s.pth \\
        --output-file svt-s.onnx --shape 224 224 --dynamic-export --verify
    python tools/deployment/pytorch2onnx.py \\
        configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py \\
        --output-file upernet.onnx --shape 128 128 --dynamic-export \\
        --verify --verify-shape 96 160
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

from mmtnt.utils import register_checkpoint_safe_globals

#: Relative difference (``max|onnx - torch| / max|torch|``) accepted by
#: ``--verify``.
DEFAULT_TOLERANCE = 1e-4
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


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Export an mmtnt classifier or segmentor to ONNX.')
    parser.add_argument('config', help='the config file')
    parser.add_argument(
        'checkpoint',
        nargs='?',
        help='the checkpoint; without it the weights are randomly '
        'initialised (for trying the export)')
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
        help='images per input (with --dynamic-export, any batch works)')
    parser.add_argument(
        '--opset-version',
        type=int,
        default=None,
        help='the ONNX opset; defaults to the exporter\'s default')
    parser.add_argument(
        '--dynamic-export',
        action='store_true',
        help='make batch, height and width dynamic axes')
    parser.add_argument(
        '--logits',
        action='store_true',
        help='classifiers: export the head\'s logits instead of the class '
        'scores (softmax or sigmoid)')
    parser.add_argument(
        '--verify',
        action='store_true',
        help='compare ONNX Runtime with PyTorch on random input; exit with '
        'status 1 when they differ by more than --tolerance')
    parser.add_argument(
        '--verify-shape',
        type=int,
        nargs=2,
        metavar=('H', 'W'),
        help='the second input size --verify checks a dynamic export at; '
        'defaults to one of other remainders than --shape (see '
        'second_shape)')
    parser.add_argument(
        '--tolerance',
        type=float,
        default=DEFAULT_TOLERANCE,
        help='largest relative difference max|onnx - torch| / max|torch| '
        f'accepted by --verify (default {DEFAULT_TOLERANCE})')
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
    """Build the classifier or segmentor of a config, with its weights.

    Args:
        cfg (Config): An mmtnt (or mmpretrain / mmseg) config.
        checkpoint (str, optional): The weights; None initialises them at
            random (a warning is logged).

    Returns:
        nn.Module: The model in eval mode, on the CPU, SyncBN layers
        replaced by BatchNorm.

    Raises:
        ValueError: For detectors and models that are neither an image
            classifier with a head nor an ``EncoderDecoder``.
        FileNotFoundError: If ``checkpoint`` is not a file.
    """
    scope = cfg.get('default_scope')
    if scope == 'mmdet':
        raise ValueError(
            'Detectors are not exported by this tool: their heads and '
            'post-processing (RoI Align, NMS, box decoding) need custom ONNX '
            'operators. Use MMDeploy (https://github.com/open-mmlab/mmdeploy) '
            'for mmdet models.')
    if scope not in ('mmpretrain', 'mmseg'):
        raise ValueError(
            f"The config's default_scope must be 'mmpretrain' (classifiers) "
            f"or 'mmseg' (segmentors), got {scope!r}.")
    if checkpoint is not None and not osp.isfile(checkpoint):
        raise FileNotFoundError(f'Checkpoint file {checkpoint} not found.')
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


def check_model_type(model):
    """Raise a ValueError unless ``model`` is an image classifier with a
    head or an mmseg ``EncoderDecoder``."""
    from mmpretrain.models import ImageClassifier
    from mmseg.models.segmentors import EncoderDecoder
    if isinstance(model, ImageClassifier) and model.with_head:
        return
    if isinstance(model, EncoderDecoder):
        return
    raise ValueError(
        f'Cannot export a {type(model).__name__}: this tool exports image '
        'classifiers with a head (mmpretrain ImageClassifier) and '
        'segmentors (mmseg EncoderDecoder).')


def export_graph(model, logits=False):
    """The module that is exported for a model (see the module docstring).

    Args:
        model (nn.Module): A model from :func:`build_model`.
        logits (bool): Classifiers: the logits instead of the scores.

    Returns:
        ClassifierGraph | SegmentorGraph: In eval mode.
    """
    from mmpretrain.models import ImageClassifier
    if isinstance(model, ImageClassifier):
        return ClassifierGraph(model, logits=logits).eval()
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


def describe_preprocessing(model):
    """One line saying how the graph's input must be normalised."""
    preprocessor = model.data_preprocessor
    mean = getattr(preprocessor, 'mean', None)
    if mean is None:
        return 'The graph takes the image unnormalised.'
    mean = [round(float(v), 3) for v in mean.flatten()]
    std = [round(float(v), 3) for v in preprocessor.std.flatten()]
    # mmpretrain's to_rgb, mmseg's bgr_to_rgb (or rgb_to_bgr).
    reversed_ = getattr(preprocessor, 'to_rgb', False) or getattr(
        preprocessor, 'channel_conversion', False)
    order = ('reversed from the order images are loaded in (BGR to RGB)'
             if reversed_ else 'in the order images are loaded in')
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
            constant). Defaults to 1.
        opset_version (int, optional): The ONNX opset. Defaults to the
            exporter's.
        dynamic (bool): Batch, height and width as dynamic axes.
            Defaults to False.

    Returns:
        dict: For a dynamic export, the range ``(low, high)`` of ``batch``,
        ``height`` and ``width`` the graph was exported for (``high`` None
        when unbounded); empty otherwise.
    """
    from torch.export import Dim
    if dynamic:
        batch_size = max(batch_size, 2)
        dynamic_shapes = ({0: Dim.DYNAMIC, 2: Dim.DYNAMIC, 3: Dim.DYNAMIC}, )
        shape = dynamic_trace_shape(shape)
    else:
        dynamic_shapes = None
    example = torch.randn(batch_size, channels, *shape)
    with torch.no_grad(), export_friendly(graph):
        program = torch.export.export(
            graph, (example, ), dynamic_shapes=dynamic_shapes, strict=False)
    weight_bytes = sum(p.numel() * p.element_size()
                       for p in graph.parameters())
    out_dir = osp.dirname(osp.abspath(output_file))
    os.makedirs(out_dir, exist_ok=True)
    torch.onnx.export(
        program,
        (example, ),
        output_file,
        dynamo=True,
        input_names=[INPUT_NAME],
        output_names=[graph.output_name],
        opset_version=opset_version,
        external_data=weight_bytes > MAX_EMBEDDED_WEIGHT_BYTES,
        verbose=False)
    return dynamic_ranges(program) if dynamic else {}


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
        and ``error`` (that exception, else None).
    """
    import onnxruntime as ort
    options = ort.SessionOptions()
    if num_threads is not None:
        options.intra_op_num_threads = num_threads
    session = ort.InferenceSession(
        output_file, options, providers=['CPUExecutionProvider'])
    generator = torch.Generator().manual_seed(seed)
    results = []
    for batch, height, width in checks:
        inputs = torch.randn(
            batch, channels, height, width, generator=generator)
        with torch.no_grad():
            expected = graph(inputs).numpy()
        result = dict(shape=tuple(inputs.shape), error=None)
        try:
            actual = session.run(None, {INPUT_NAME: inputs.numpy()})[0]
            result.update(
                max_abs=float(
                    np.abs(actual.astype(np.float64) - expected).max()),
                relative=relative_difference(actual, expected))
        except Exception as error:  # ONNX Runtime's or a shape mismatch
            result.update(
                max_abs=float('inf'), relative=float('inf'), error=error)
        results.append(result)
    return results


def format_range(low, high):
    return f'[{low}, {"inf" if high is None else high}]'


def main(argv=None):
    args = parse_args(argv)
    if args.batch_size < 1:
        raise SystemExit('Error: --batch-size must be at least 1.')
    cfg = Config.fromfile(args.config)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    try:
        model = build_model(cfg, args.checkpoint)
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(f'Error: {error}')
    graph = export_graph(model, logits=args.logits)
    channels = input_channels(model)
    shape = tuple(args.shape)
    checks = [(args.batch_size, *shape)]
    if args.verify and args.dynamic_export:
        other = tuple(args.verify_shape or second_shape(*shape))
        checks.append((args.batch_size + 1, *other))
    try:
        for _, height, width in checks:
            check_input_size(graph, channels, (height, width))
    except ValueError as error:
        raise SystemExit(f'Error: {error}')

    ranges = export_onnx(
        graph,
        args.output_file,
        shape,
        channels=channels,
        batch_size=args.batch_size,
        opset_version=args.opset_version,
        dynamic=args.dynamic_export)
    print(f'Exported {type(model).__name__} to {args.output_file}: input '
          f'{INPUT_NAME!r} (N, {channels}, H, W), output '
          f'{graph.output_name!r}.')
    print(describe_preprocessing(model))
    if ranges:
        print('Dynamic axes: batch, height and width (torch.export '
              'checked the graph for ' +
              ', '.join(f'{axis} {format_range(*r)}'
                        for axis, r in ranges.items()) +
              '; sizes below those bounds are not excluded, only not '
              'checked by the tracer).')
    else:
        print(f'Static input shape ({args.batch_size}, {channels}, '
              f'{shape[0]}, {shape[1]}).')

    if not args.verify:
        return
    failed = False
    for result in verify_onnx(args.output_file, graph, checks, channels):
        ok = result['relative'] <= args.tolerance
        failed |= not ok
        if result['error'] is not None:
            print(f'Verify {result["shape"]}: FAILED, {result["error"]}')
            continue
        print(f'Verify {result["shape"]}: max abs diff '
              f'{result["max_abs"]:.3g}, relative diff '
              f'{result["relative"]:.3g} (max|onnx - torch| / max|torch|, '
              f'tolerance {args.tolerance:g}): '
              f'{"OK" if ok else "FAILED"}')
    if failed:
        print('Error: ONNX Runtime and PyTorch disagree.', file=sys.stderr)
        raise SystemExit(1)


if __name__ == '__main__':
    main()
