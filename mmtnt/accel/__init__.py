"""The CPU accelerator: everything in mmtnt that is tuned for the CPU.

The models of :mod:`mmtnt.models` are plain PyTorch, the same on every
device. :func:`accelerate_for_cpu` applies this package to a finished model;
``tools/train.py``, ``tools/test.py`` and the benchmark do so when they run
on the CPU, unless told not to (``--no-cpu-accel`` or
``cpu_accel = False`` in the config), and then also make glibc keep freed
memory (:func:`keep_freed_memory`).
"""
from .allocator import keep_freed_memory, release_freed_memory
from .api import CPU_VERSIONS, accelerate_for_cpu, is_accelerated
from .runner import accelerate_runner

__all__ = [
    'accelerate_for_cpu', 'is_accelerated', 'CPU_VERSIONS',
    'accelerate_runner', 'keep_freed_memory', 'release_freed_memory'
]
