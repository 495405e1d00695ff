"""mmtnt: TNT, PyramidTNT and Twins backbones for OpenMMLab."""
from .hub import register_hub_scheme
from .utils import register_checkpoint_safe_globals
from .version import __version__

# Resuming reads the numpy values and history buffers of mmengine's
# checkpoints under torch's weights_only loading.
register_checkpoint_safe_globals()
# `mmtnt://NAME` loads published weights wherever mmengine loads a checkpoint.
register_hub_scheme()

__all__ = ['__version__', 'accelerate_for_cpu']


def __getattr__(name):
    """``mmtnt.accelerate_for_cpu``, imported from :mod:`mmtnt.accel` on
    first use: the plain models never load the accelerator."""
    if name == 'accelerate_for_cpu':
        from .accel import accelerate_for_cpu
        return accelerate_for_cpu
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
