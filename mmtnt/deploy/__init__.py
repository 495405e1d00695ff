"""Graphs of mmtnt models for export (ONNX): detectors end in their
detections; INT8 graphs for ONNX Runtime on the CPU."""
from .detection import (DetectorGraph, dense_head_detections, nms_by_group,
                        rpn_proposals)
from .quantize import calibration_inputs, cpu_int8_features, quantize_onnx

__all__ = [
    'DetectorGraph', 'dense_head_detections', 'nms_by_group', 'rpn_proposals',
    'calibration_inputs', 'cpu_int8_features', 'quantize_onnx'
]
