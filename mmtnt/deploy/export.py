"""Export an mmtnt classifier, segmentor or detector to ONNX.

:func:`build_model` builds the model of a config or of a model name with
its weights (through :func:`mmtnt.apis.init_model`, under the config's
scope, none left behind); :func:`export_onnx` writes the graph of
:func:`~mmtnt.deploy.graphs.export_graph` to an ONNX file.

The graph is made by ``torch.onnx.export(..., dynamo=True)`` from a
``torch.export`` program. With ``dynamic=True`` the batch, height and
width are symbols (detectors: height and width; the batch is 1): the
backbones' padding, LSA windows and masks, and the resizing of position
terms are computed from the input size inside the graph, so one graph
serves every size the model takes. The returned ranges are what the
tracer checked. During the export the model computes its attention and
resizing as :func:`~mmtnt.deploy.graphs.export_friendly` sets it to; the
attention in parts is traced as one operator, written out as ONNX nodes
through :data:`~mmtnt.deploy.chunked_attention.ONNX_TRANSLATIONS`.

Detector graphs (:class:`~mmtnt.deploy.DetectorGraph`) output ``boxes``,
``scores``, ``labels`` and, for Mask R-CNN, ``roi_masks``, which
:func:`mmtnt.deploy.paste_masks` turns into mmdet's image masks; their
optional second input, :data:`IMG_SHAPE_NAME`, is the image's size before
padding.
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

#: Larger weights go to an external ``.data`` file (a protobuf holds 2 GiB
#: at most).
MAX_EMBEDDED_WEIGHT_BYTES = 1.8 * 2**30
#: The smallest height and width a dynamic export is traced at.
#: torch.export takes a size derived from the input that is 1 at the
#: example as 1 for every input (traced at 224x224, Twins-SVT's 7x7 last
#: stage is a single LSA window); at 512 every map of the three families
#: has at least two windows or positions a side.
MIN_DYNAMIC_TRACE_SIZE = 512


def is_model_name(model):
    """Whether ``model`` is a model name, not a ``.py`` config file."""
    return isinstance(model, str) and osp.splitext(model)[1] != '.py'


def build_model(model, checkpoint=None):
    """Build the classifier, segmentor or detector of a config, or of a
    model name, with its weights, ready for :func:`export_onnx`.

    Args:
        model (str | Config): A config file, a loaded config (mmtnt's, or
            any whose ``default_scope`` is ``mmpretrain``, ``mmseg`` or
            ``mmdet``), or a model name of :func:`mmtnt.apis.list_models`
            (in any case).
        checkpoint (str | bool, optional): The weights: a file, a URL or
            ``mmtnt://NAME[@SOURCE]``. None: a model name's published
            weights, and random ones for a config (a warning is logged).
            False: random weights, for a name too.

    Returns:
        BaseModel: In eval mode, on the CPU, SyncBN layers replaced by
        BatchNorm, with ``cfg`` and ``dataset_meta``
        (:func:`mmtnt.apis.init_model`).

    Raises:
        ValueError: For an unknown model name, another ``default_scope``,
            a missing checkpoint file (``CheckpointFileError``), and models
            that :func:`check_model_type` refuses.
        HubError: If published weights cannot be fetched.

    Examples:
        >>> from mmtnt.deploy import build_model
        >>> model = build_model('configs/twins/twins-svt-small_8xb128_in1k.py',
        ...                     'svt-s.pth')  # doctest: +SKIP
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
    """Run a graph of :func:`~mmtnt.deploy.graphs.export_graph` once at
    ``shape`` (height, width) with ``channels`` (by default the model's),
    turning a size it refuses (not positive, or too small for its patches
    and stages) into a clear ValueError.

    Examples:
        >>> check_input_size(graph, (8, 64))  # a Twins classifier
        Traceback (most recent call last):
        ValueError: The model cannot take a 8x64 input (too small?): ...
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
        model (nn.Module | str | Config): A graph of
            :func:`~mmtnt.deploy.graphs.export_graph` (or any module, as it
            is), a model from :func:`build_model` (its graph is exported),
            or what :func:`build_model` takes, built with ``checkpoint``.
        output_file (str): The ONNX file (its folder is made).
        shape (tuple[int, int]): Height and width of the example input
            (a dynamic export traces at :func:`dynamic_trace_shape`).
        dynamic (bool): Batch, height and width as dynamic axes (for a
            :class:`~mmtnt.deploy.DetectorGraph`, height and width).
            Defaults to False.
        channels (int, optional): Image channels. Defaults to the model's
            (:func:`~mmtnt.deploy.graphs.input_channels`), 3 for another
            module.
        batch_size (int): Images of the example input (a dynamic export
            traces at least 2, as a batch of 1 would be taken as a
            constant). Defaults to 1. A detector's must be 1.
        logits (bool): Classifiers built here or given as a model: export
            the logits instead of the scores. Defaults to False.
        checkpoint (str | bool, optional): The weights of a model built
            here, as :func:`build_model` takes them.
        opset_version (int, optional): The ONNX opset. Defaults to the
            exporter's.
        mask_output (str): Mask R-CNN built here or given as a model:
            per-RoI masks (``'roi'``) or image masks (``'image'``), as
            :func:`~mmtnt.deploy.graphs.export_graph` takes it. Defaults
            to ``'roi'``.

    Returns:
        dict: For a dynamic export, the range ``(low, high)`` of ``batch``,
        ``height`` and ``width`` the graph was exported for (``high`` None
        when unbounded); empty otherwise.

    Raises:
        ValueError: For a detector with ``batch_size`` other than 1, a
            checkpoint given with a built module.

    Examples:
        >>> from mmtnt.deploy import export_onnx
        >>> ranges = export_onnx('twins-svt-small_8xb128_in1k', 'svt-s.onnx',
        ...                      (224, 224), dynamic=True)  # published weights
        >>> sorted(ranges)
        ['batch', 'height', 'width']
        >>> export_onnx('configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-'
        ...             '128x128.py', 'upernet.onnx', (128, 128),
        ...             checkpoint='iter_2000.pth')  # doctest: +SKIP
        {}
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
    """Make the :data:`IMG_SHAPE_NAME` input of a detector's graph
    (``onnx_ir.Graph``, changed in place) optional: an initializer of that
    name holds :data:`UNPADDED`."""
    import onnx_ir as ir
    value = next(v for v in onnx_graph.inputs if v.name == IMG_SHAPE_NAME)
    value.const_value = ir.tensor(np.array(UNPADDED, dtype=np.int64),
                                  name=IMG_SHAPE_NAME)
    onnx_graph.register_initializer(value)


def dynamic_trace_shape(shape):
    """The example size a dynamic export is traced at: ``shape``, each side
    at least :data:`MIN_DYNAMIC_TRACE_SIZE`.

    Examples:
        >>> dynamic_trace_shape((224, 640))
        (512, 640)
    """
    return tuple(max(size, MIN_DYNAMIC_TRACE_SIZE) for size in shape)


def dynamic_ranges(program):
    """The range ``(low, high)`` of the ``batch``, ``height`` and
    ``width`` of the image input of a ``torch.export`` program, ``high``
    None when unbounded."""
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
