"""Benchmarks of mmtnt's models against their peers: speed, memory, ONNX
and INT8 graphs. They live beside the package, not in it (as timm keeps
its ``benchmark.py``), and run from the repository root:

- ``python -m benchmarks.benchmark``: classifiers' forward passes, train
  steps and memory on the CPU or a GPU, against timm, mmpretrain, mmseg;
- ``python -m benchmarks.gpu_benchmark``: the same in every precision;
- ``python -m benchmarks.dense_benchmark``: detectors' and segmentors'
  train steps, memory and schedules' GPU-hours;
- ``python -m benchmarks.attention_routes``: the two attention routes on
  the shapes of real models;
- ``python -m benchmarks.onnx_benchmark`` and
  ``python -m benchmarks.int8_benchmark``: ONNX Runtime against the eager
  models, fp32 and INT8;
- ``python -m benchmarks.mask_rcnn_onnx_benchmark``: a Mask R-CNN's ONNX
  graph against mmdet's ``predict``;
- ``python -m benchmarks.data_loader``: a config's train pipeline in
  images/s per CPU core, and the cores a GPU's step needs.

Every one measures with :mod:`benchmarks.measure` (interleaved rounds,
medians, per-round ratios, peak memory) and writes its tables with
:func:`mmtnt.analysis.format_table`.
"""
from . import mmcv_ops_torchvision

# Where mmcv has no compiled ops (machines with no mmcv build for their
# torch and CUDA), mmdet and mmseg cannot be imported: the benchmarks then
# run mmcv's NMS and RoIAlign on torchvision's kernels, in this process
# only. True where they do; the tables say so.
STANDIN_OPS = mmcv_ops_torchvision.install()
