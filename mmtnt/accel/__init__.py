"""The CPU accelerator: everything in mmtnt that is tuned for the CPU.

The models of :mod:`mmtnt.models` are plain PyTorch, the same on every
device. :func:`accelerate_for_cpu` applies this package to a finished model;
the tools do so through :func:`accelerate_runner` on the CPU unless the
config says ``cpu_accel = False`` (``--no-cpu-accel``).
"""
from .allocator import keep_freed_memory, release_freed_memory
from .api import (CPU_VERSIONS, accelerate_for_cpu, accelerate_runner,
                  is_accelerated)

__all__ = [
    'accelerate_for_cpu', 'is_accelerated', 'CPU_VERSIONS',
    'accelerate_runner', 'keep_freed_memory', 'release_freed_memory'
]
