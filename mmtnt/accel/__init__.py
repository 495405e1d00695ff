"""The CPU accelerator: :func:`accelerate_for_cpu` makes a finished (plain
PyTorch) model faster on the CPU; the tools apply it through
:func:`accelerate_runner` unless the config says ``cpu_accel = False``.
"""
from .allocator import keep_freed_memory, release_freed_memory
from .api import (CPU_VERSIONS, accelerate_for_cpu, accelerate_runner,
                  is_accelerated)

__all__ = [
    'accelerate_for_cpu', 'is_accelerated', 'CPU_VERSIONS',
    'accelerate_runner', 'keep_freed_memory', 'release_freed_memory'
]
