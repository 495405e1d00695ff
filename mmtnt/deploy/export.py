"""Export an mmtnt classifier, segmentor or detector to ONNX.

:func:`build_model` builds the model of a config or model name with its
weights; :func:`export_onnx` writes the graph of
:func:`~mmtnt.deploy.graphs.export_graph` to an ONNX file, through
``torch.export`` and ``torch.onnx.export(..., dynamo=True)``. With
``dynamic=True`` one graph serves every input size the model takes.
"""
import logging
import os
import os.path as osp

import numpy as np
import torch
from mmengine.logging import print_log
from mmengine.model import BaseModel, revert_sync_batchnorm

from ..apis.model import init_model, model_config
from .chunked_attention import ONNX_TRANSLATIONS
from .detection import UNPADDED, DetectorGraph, check_detector
from .graphs import (decompose_for_export, export_friendly, export_graph,
                     input_channels, is_detector, output_names)
from .runtime import IMG_SHAPE_NAME, INPUT_NAME

#: Larger weights go to an external ``.data`` file (protobuf's 2 GiB).
MAX_EMBEDDED_WEIGHT_BYTES = 1.8 * 2**30
#: The smallest height and width a dynamic export is traced at:
#: torch.export fixes derived sizes that are 1 at the example, and at 512
#: every map has at least two windows or positions a side.
MIN_DYNAMIC_TRACE_SIZE = 512


def is_model_name(model):
    """Whether ``model`` is a model name, not a ``.py`` config file."""
    return isinstance(model, str) and osp.splitext(model)[1] != '.py'


def build_model(model, checkpoint=None):
    """Build the classifier, segmentor or detector of a config, or of a
    model name, with its weights, ready for :func:`export_onnx`.

    Args:
        model (str | Config): A config file or loaded config (scope
            mmpretrain, mmseg or mmdet), or a model name of
            :func:`mmtnt.apis.list_models` (in any case).
        checkpoint (str | bool, optional): A file, a URL or
            ``mmtnt://NAME[@SOURCE]``. None: a name's published weights, a
            config's random ones (with a warning). False: random weights.

    Returns:
        BaseModel: In eval mode, on the CPU, SyncBN replaced by BatchNorm,
        with ``cfg`` and ``dataset_meta``.

    Raises:
        ValueError: For an unknown name or scope, a missing checkpoint
            file, and models that :func:`check_model_type` refuses.
        HubError: If published weights cannot be fetched.

    Examples:
        >>> from mmtnt.deploy import build_model
        >>> model = build_model('twins-svt-small_8xb128_in1k')  # published
        >>> type(model).__name__
        'ImageClassifier'
    """
    pretrained = is_model_name(model) if checkpoint is None else checkpoint
    config, checkpoint = model_config(model, pretrained)
    if checkpoint is None:
        print_log(
            'Warning: no checkpoint given, the weights are randomly '
            'initialised.',
            logger='current',
            level=logging.WARNING)
    built = init_model(config, checkpoint, init_weights=True)
    check_model_type(built)
    return revert_sync_batchnorm(built).eval()


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
        check_detector(model)
        return
    raise ValueError(
        f'Cannot export a {type(model).__name__}: mmtnt exports image '
        'classifiers with a head (mmpretrain ImageClassifier), '
        'segmentors (mmseg EncoderDecoder) and mmdet detectors.')


def check_input_size(graph, shape, channels=None):
    """Run a graph once at ``shape`` (height, width), turning a size it
    refuses into a clear ValueError; ``channels`` defaults to the model's.
    """
    height, width = shape
    if height < 1 or width < 1:
        raise ValueError(f'The input size must be positive, got '
                         f'{height}x{width}.')
    if channels is None:
        channels = input_channels(graph)
    try:
        with torch.no_grad():
            graph(torch.zeros(1, channels, height, width))
    except (ValueError, RuntimeError) as error:
        raise ValueError(
            f'The model cannot take a {height}x{width} input (too small?): '
            f'{error}') from error


def export_onnx(model,
                output_file,
                shape,
                dynamic=False,
                channels=None,
                batch_size=1,
                logits=False,
                checkpoint=None,
                opset_version=None,
                mask_output='roi'):
    """Export a model to an ONNX file.

    Args:
        model (nn.Module | str | Config): A graph (or any module, as it
            is), a model from :func:`build_model`, or what
            :func:`build_model` takes, built with ``checkpoint``.
        output_file (str): The ONNX file (its folder is made).
        shape (tuple[int, int]): Height and width of the example input
            (dynamic: at least :func:`dynamic_trace_shape`).
        dynamic (bool): Batch (not for detectors), height and width as
            dynamic axes. Defaults to False.
        channels (int, optional): Image channels. Defaults to the model's.
        batch_size (int): Images of the example input (dynamic: at least
            2). Defaults to 1; a detector's must be 1.
        logits (bool): Classifiers: export the logits instead of the
            scores. Defaults to False.
        checkpoint (str | bool, optional): The weights of a model built
            here, as :func:`build_model` takes them.
        opset_version (int, optional): The ONNX opset. Defaults to the
            exporter's.
        mask_output (str): Mask R-CNN: ``'roi'`` or ``'image'`` masks, as
            :func:`~mmtnt.deploy.graphs.export_graph` takes it. Defaults
            to ``'roi'``.

    Returns:
        dict: Dynamic export: the range ``(low, high)`` of ``batch``,
        ``height`` and ``width`` (``high`` None when unbounded); else empty.

    Raises:
        ValueError: For a detector with ``batch_size`` other than 1, or a
            checkpoint given with a built module.

    Examples:
        >>> from mmtnt.deploy import export_onnx
        >>> ranges = export_onnx('twins-svt-small_8xb128_in1k', 'svt-s.onnx',
        ...                      (224, 224), dynamic=True)  # published weights
        >>> sorted(ranges)
        ['batch', 'height', 'width']
    """
    if isinstance(model, torch.nn.Module):
        if checkpoint is not None:
            raise ValueError('checkpoint is for a model that export_onnx '
                             'builds: load it into a built model instead.')
        graph = export_graph(model, logits, mask_output) if isinstance(
            model, BaseModel) else model
    else:
        graph = export_graph(
            build_model(model, checkpoint), logits, mask_output)
    if channels is None:
        channels = input_channels(graph)
    detector = isinstance(graph, DetectorGraph)
    if detector and batch_size != 1:
        raise ValueError('Detectors are exported for one image: batch_size '
                         f'must be 1, got {batch_size}.')
    from torch.export import Dim
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
        program = decompose_for_export(
            torch.export.export(
                graph, example, dynamic_shapes=dynamic_shapes,
                strict=False))
    onnx_program = torch.onnx.export(
        program,
        example,
        dynamo=True,
        input_names=[INPUT_NAME, IMG_SHAPE_NAME][:len(example)],
        custom_translation_table=ONNX_TRANSLATIONS,
        output_names=output_names(graph),
        opset_version=opset_version,
        verbose=False)
    if detector:
        default_img_shape(onnx_program.model.graph)
    weight_bytes = sum(p.numel() * p.element_size()
                       for p in graph.parameters())
    os.makedirs(osp.dirname(osp.abspath(output_file)), exist_ok=True)
    onnx_program.save(
        output_file,
        external_data=weight_bytes > MAX_EMBEDDED_WEIGHT_BYTES)
    return dynamic_ranges(program) if dynamic else {}


def default_img_shape(onnx_graph):
    """Make the :data:`IMG_SHAPE_NAME` input of a detector's ``onnx_ir``
    graph optional, defaulting to :data:`UNPADDED`."""
    import onnx_ir as ir
    value = next(v for v in onnx_graph.inputs if v.name == IMG_SHAPE_NAME)
    value.const_value = ir.tensor(np.array(UNPADDED, dtype=np.int64),
                                  name=IMG_SHAPE_NAME)
    onnx_graph.register_initializer(value)


def dynamic_trace_shape(shape):
    """``shape``, each side at least :data:`MIN_DYNAMIC_TRACE_SIZE`.

    Examples:
        >>> dynamic_trace_shape((224, 640))
        (512, 640)
    """
    return tuple(max(size, MIN_DYNAMIC_TRACE_SIZE) for size in shape)


def dynamic_ranges(program):
    """The ``(low, high)`` of the image input's ``batch``, ``height`` and
    ``width`` in a ``torch.export`` program."""
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
