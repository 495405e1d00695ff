from mmengine.logging import print_log

from .allocator import keep_freed_memory
from .api import accelerate_for_cpu, model_device


def accelerate_runner(runner):
    """Apply the CPU accelerator to a runner's model when it runs on the
    CPU, and make glibc keep freed memory for reuse.

    Nothing changes when the config says ``cpu_accel = False``
    (``--no-cpu-accel`` of the tools), when it compiles the model
    (``compile``: the compiler sees the plain model), or when the model is
    on another device.

    Args:
        runner (mmengine.runner.Runner): A built runner.

    Returns:
        bool: Whether the accelerator was applied.
    """
    cfg = runner.cfg
    if not cfg.get('cpu_accel', True):
        print_log('CPU accelerator: off (cpu_accel=False).', logger='current')
        return False
    if cfg.get('compile'):
        print_log('CPU accelerator: off, torch.compile compiles the plain '
                  'model.', logger='current')
        return False
    device = model_device(runner.model)
    if device is None or device.type != 'cpu':
        return False
    accelerate_for_cpu(runner.model)
    # Freed activations are reused instead of page-faulted in every step.
    keep_freed_memory()
    print_log('CPU accelerator: on (mmtnt.accelerate_for_cpu; turn it off '
              'with --no-cpu-accel or cpu_accel=False).', logger='current')
    return True
