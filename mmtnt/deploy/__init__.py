"""Graphs of mmtnt models for export (ONNX): detectors end in their
detections."""
from .detection import (DetectorGraph, dense_head_detections, nms_by_group,
                        rpn_proposals)

__all__ = [
    'DetectorGraph', 'dense_head_detections', 'nms_by_group', 'rpn_proposals'
]
