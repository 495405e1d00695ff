"""Deployment of mmtnt models: build (:func:`build_model`), export to ONNX
(:func:`export_onnx`), run in ONNX Runtime or OpenVINO (:func:`cpu_session`,
``backend`` and ``precision``), verify against PyTorch (:func:`verify_onnx`),
and quantize to INT8 (:func:`quantize_onnx` for ONNX Runtime,
:func:`quantize_openvino` for OpenVINO).

Examples:
    >>> from mmtnt.deploy import (INPUT_NAME, build_model, cpu_session,
    ...                           export_graph, export_onnx, verify_onnx,
    ...                           verify_sizes)
    >>> model = build_model('twins-svt-small_8xb128_in1k')  # published
    >>> graph = export_graph(model)
    >>> ranges = export_onnx(graph, 'svt-s.onnx', (224, 224), dynamic=True)
    >>> report = verify_onnx('svt-s.onnx', graph,
    ...                      verify_sizes(graph, (224, 224), dynamic=True))
    >>> report.passed
    True
    >>> session = cpu_session('svt-s.onnx', backend='openvino',
    ...                       precision='bf16')
    >>> scores, = session.run(None, {INPUT_NAME: images})
"""
from .boxes import nms_by_group
from .detection import (UNPADDED, DetectorGraph, dense_head_detections,
                        rpn_proposals)
from .evaluate import evaluate_graphs, evaluate_onnx
from .export import (MIN_DYNAMIC_TRACE_SIZE, build_model, check_input_size,
                     check_model_type, dynamic_trace_shape, export_onnx)
from .graphs import (ClassifierGraph, SegmentorGraph, describe_preprocessing,
                     export_graph, input_channels, is_detector, output_names)
from .masks import paste_masks
from .quantize import calibration_inputs, cpu_int8_features, quantize_onnx
from .quantize_openvino import openvino_int8_file, quantize_openvino
from .runtime import (BACKENDS, IMG_SHAPE_NAME, INPUT_NAME, PRECISIONS,
                      OpenVINOSession, cpu_session)
from .verify import (BF16_TOLERANCE, CLS_TOLERANCES, DEFAULT_TOLERANCE,
                     VerifyReport, padded_check, second_shape, verify_onnx,
                     verify_sizes)
from .verify_detection import (DET_BOX_TOLERANCE, DET_MASK_IOU,
                               DET_SCORE_TOLERANCE, graph_detections,
                               match_detections, verify_detector_onnx)

__all__ = [
    'BACKENDS', 'BF16_TOLERANCE', 'CLS_TOLERANCES', 'ClassifierGraph',
    'DEFAULT_TOLERANCE', 'OpenVINOSession', 'PRECISIONS',
    'DET_BOX_TOLERANCE', 'DET_MASK_IOU', 'DET_SCORE_TOLERANCE',
    'DetectorGraph', 'IMG_SHAPE_NAME', 'INPUT_NAME', 'MIN_DYNAMIC_TRACE_SIZE',
    'SegmentorGraph', 'UNPADDED', 'VerifyReport', 'build_model',
    'calibration_inputs', 'check_input_size', 'check_model_type',
    'cpu_int8_features', 'cpu_session', 'dense_head_detections',
    'describe_preprocessing', 'dynamic_trace_shape', 'evaluate_graphs',
    'evaluate_onnx', 'export_graph', 'export_onnx', 'graph_detections',
    'input_channels', 'is_detector', 'match_detections', 'nms_by_group',
    'openvino_int8_file', 'output_names', 'padded_check', 'paste_masks',
    'quantize_onnx', 'quantize_openvino',
    'rpn_proposals', 'second_shape', 'verify_detector_onnx', 'verify_onnx',
    'verify_sizes'
]
