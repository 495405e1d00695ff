from .checkpoint import (CheckpointFileError, check_checkpoint_file,
                         checkpoint_to_load, register_checkpoint_safe_globals)
from .data_check import check_data_paths
from .distributed import (cpu_model_wrapper_cfg, init_cpu_process_group,
                          setup_cpu_distributed, shutdown_cpu_distributed)

__all__ = [
    'CheckpointFileError', 'check_checkpoint_file', 'checkpoint_to_load',
    'register_checkpoint_safe_globals', 'check_data_paths',
    'cpu_model_wrapper_cfg', 'init_cpu_process_group', 'setup_cpu_distributed',
    'shutdown_cpu_distributed'
]
