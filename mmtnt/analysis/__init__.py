"""Measuring mmtnt's models: FLOPs, speed and memory, against their peers.

The command lines under ``tools/analysis_tools/`` are thin layers over
these modules, whose ``main(argv)`` they call:

- :mod:`~mmtnt.analysis.flops` counts the parameters and MACs of a config's
  model (attention products included); :mod:`~mmtnt.analysis.complexity`
  is ``get_flops.py``'s report and the papers' table;
- :mod:`~mmtnt.analysis.variants` builds the classifiers compared (mmtnt's
  backbones and their timm, mmpretrain and mmseg peers);
- :mod:`~mmtnt.analysis.benchmark` (``benchmark.py``),
  :mod:`~mmtnt.analysis.gpu_benchmark` (``gpu_benchmark.py``),
  :mod:`~mmtnt.analysis.dense_benchmark` (``dense_benchmark.py``, over
  :mod:`~mmtnt.analysis.dense`), :mod:`~mmtnt.analysis.attention_routes`,
  :mod:`~mmtnt.analysis.onnx_benchmark` and
  :mod:`~mmtnt.analysis.int8_benchmark` (INT8 graphs) measure;
- :mod:`~mmtnt.analysis.logs` draws training logs (``analyze_logs.py``),
  :mod:`~mmtnt.analysis.seg_confusion` makes mmseg's confusion matrix
  (``seg_confusion_matrix.py``);
- :mod:`~mmtnt.analysis.mmcv_ops_torchvision` stands in for mmcv's compiled
  ops where there are none.

What they share is exported here: timed rounds
(:mod:`~mmtnt.analysis.timing`), table cells
(:mod:`~mmtnt.analysis.tables`) and command-line checks
(:mod:`~mmtnt.analysis.options`). Importing the package loads neither
mmcv's ops nor the OpenMMLab task libraries.

Examples:
    >>> from mmtnt.analysis import format_times, time_runs
    >>> times = time_runs(dict(noop=lambda: None), warmup=1, rounds=3)
    >>> len(times['noop']), format_times([0.012, 0.010, 0.015])
    (3, '12 (10-15)')
"""
from .options import (accel_note, checked_device, checked_img_size,
                      device_description, malloc_note, set_malloc)
from .tables import format_table, format_times, markdown_table, ratio_cell
from .timing import (interleaved_rounds, matmul_peak, new_optimizer,
                     peak_added_bytes, random_batch, step_runner, synchronize,
                     time_forward, time_runs, time_train_step,
                     train_step_memory)

__all__ = [
    'accel_note', 'checked_device', 'checked_img_size', 'device_description',
    'format_table', 'format_times', 'interleaved_rounds', 'malloc_note',
    'markdown_table', 'matmul_peak', 'new_optimizer', 'peak_added_bytes',
    'random_batch', 'ratio_cell', 'set_malloc', 'step_runner', 'synchronize',
    'time_forward', 'time_runs', 'time_train_step', 'train_step_memory'
]
