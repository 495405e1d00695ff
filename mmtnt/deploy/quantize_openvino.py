"""INT8 OpenVINO models of exported graphs, through NNCF.

:func:`quantize_openvino` reads an fp32 graph of
:func:`mmtnt.deploy.export_onnx` into OpenVINO, quantizes it post-training
with ``nncf.quantize`` on calibration images
(:func:`mmtnt.deploy.quantize.calibration_inputs`) and writes the INT8 IR
next to the ONNX file (:func:`openvino_int8_file`), where
``cpu_session(onnx_file, backend='openvino', precision='int8')`` finds it.

NNCF's transformer preset (``ModelType.TRANSFORMER``: every mmtnt backbone
is a vision transformer) quantizes the inputs of the matrix products and
convolutions, of every task alike, and keeps the rest float32: LayerNorm,
Softmax and GELU, and a detector's box decoding, ``TopK``,
``NonMaxSuppression`` and ``RoiAlign``, which are not products. As ONNX
Runtime's static mode does (:func:`mmtnt.deploy.quantize.boundary_nodes`),
the first weighted products from the input (the patch embedding) and the
last before the outputs (the classifier, the decode head's, the RPN's, box
and mask heads' predictors) stay float32 too (``ignored_scope``); the RoI
heads' other layers are quantized.

Every weight uses 7 bits by default (NNCF's ``OverflowFix.ENABLE``), so
that CPUs with AVX2 and no VNNI, whose 16-bit sums of two uint8 x int8
products would saturate with 8 bits, compute what CPUs with VNNI compute.
"""
import os
import os.path as osp
import tempfile

import numpy as np

from .quantize import boundary_nodes
from .runtime import INPUT_NAME

#: The suffix of the INT8 IR next to its ONNX file.
INT8_SUFFIX = '_openvino_int8.xml'
#: OpenVINO's op types of the weighted ONNX nodes (``MatMul``, ``Gemm``,
#: ``Conv``, ``ConvTranspose``).
PRODUCT_TYPES = ('MatMul', 'Convolution', 'GroupConvolution',
                 'ConvolutionBackpropData')


def openvino_int8_file(onnx_file):
    """The path of the INT8 IR (``.xml``, with its ``.bin``) next to
    ``onnx_file``.

    Args:
        onnx_file (str): The fp32 ONNX graph.

    Returns:
        str: The IR's ``.xml`` path.

    Examples:
        >>> openvino_int8_file('work_dirs/svt-s.onnx')
        'work_dirs/svt-s_openvino_int8.xml'
    """
    return osp.splitext(onnx_file)[0] + INT8_SUFFIX


def calibration_dataset(inputs):
    """NNCF's dataset of the calibration arrays, each fed as the graph's
    image input."""
    import nncf
    return nncf.Dataset(
        list(inputs),
        lambda array: {INPUT_NAME: np.ascontiguousarray(array, np.float32)})


def boundary_ops(model, onnx_file):
    """The friendly names of the ops of an OpenVINO model (read from
    ``onnx_file``) that compute the ONNX graph's boundary nodes
    (:func:`~mmtnt.deploy.quantize.boundary_nodes`): the op that gives each
    node's output tensor, and up its first inputs to the product (a bias
    ``Add`` and its ``MatMul``, say)."""
    import onnx
    graph = onnx.load(onnx_file, load_external_data=False)
    first, last = boundary_nodes(graph)
    names = set(first + last)
    producers = {
        name: op
        for op in model.get_ops() for output in op.outputs()
        for name in output.get_names()
    }
    ignored = []
    for node in graph.graph.node:
        if node.name not in names:
            continue
        op = producers[node.output[0]]
        ignored.append(op.get_friendly_name())
        while op.get_type_name() not in PRODUCT_TYPES:
            op = op.input_value(0).get_node()
            ignored.append(op.get_friendly_name())
    return ignored


def quantized_model(model, inputs, ignored, reduce_range=True):
    """``nncf.quantize`` of an OpenVINO model on calibration arrays, with
    the rules of the module docstring: the ops named ``ignored`` stay
    float, the weights use 7 bits with ``reduce_range``."""
    import nncf
    from nncf.quantization.advanced_parameters import (
        AdvancedQuantizationParameters, OverflowFix)
    return nncf.quantize(
        model,
        calibration_dataset(inputs),
        subset_size=len(inputs),
        model_type=nncf.ModelType.TRANSFORMER,
        ignored_scope=nncf.IgnoredScope(names=ignored),
        advanced_parameters=AdvancedQuantizationParameters(
            overflow_fix=OverflowFix.ENABLE
            if reduce_range else OverflowFix.DISABLE))


def save_model_atomically(model, out_file):
    """Write an OpenVINO model's ``.xml`` and ``.bin`` under temporary names
    in the destination folder, then move them into place, so that processes
    that read or write the same IR meanwhile never see half a file."""
    import openvino
    folder = osp.dirname(osp.abspath(out_file))
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        tmp_xml = osp.join(tmp, osp.basename(out_file))
        openvino.save_model(model, tmp_xml, compress_to_fp16=False)
        out_bin = osp.splitext(out_file)[0] + '.bin'
        os.replace(osp.splitext(tmp_xml)[0] + '.bin', out_bin)
        os.replace(tmp_xml, out_file)


def quantize_openvino(onnx_file, inputs, out_file=None, reduce_range=True):
    """Post-training INT8 quantization of an fp32 ONNX graph with NNCF.

    Args:
        onnx_file (str): The fp32 graph, e.g. from
            :func:`~mmtnt.deploy.export_onnx`.
        inputs (Sequence[np.ndarray]): Preprocessed calibration images
            (N, C, H, W), e.g. from
            :func:`~mmtnt.deploy.quantize.calibration_inputs`.
        out_file (str, optional): The IR's ``.xml``; by default
            :func:`openvino_int8_file` of ``onnx_file``.
        reduce_range (bool): Store the weights in 7 bits, which no x86-64
            CPU saturates; 8 bits saturate on AVX2 without VNNI. Defaults to
            True.

    Returns:
        str: The IR's ``.xml`` path (its weights in the ``.bin`` beside).

    Examples:
        >>> quantize_openvino('svt-s.onnx', calibration)  # doctest: +SKIP
        'svt-s_openvino_int8.xml'
    """
    from .runtime import openvino_core
    core = openvino_core()
    if not osp.isfile(onnx_file):
        raise FileNotFoundError(f'ONNX file {onnx_file} not found.')
    if inputs is None or len(inputs) == 0:
        raise ValueError(
            'INT8 quantization needs calibration inputs: a list of '
            'preprocessed images (N, C, H, W), e.g. from '
            'calibration_inputs(cfg, num_images).')
    out_file = out_file or openvino_int8_file(onnx_file)
    model = core.read_model(onnx_file)
    model = quantized_model(model, inputs, boundary_ops(model, onnx_file),
                            reduce_range)
    save_model_atomically(model, out_file)
    return out_file
