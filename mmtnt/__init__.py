"""mmtnt: TNT, PyramidTNT and Twins backbones for OpenMMLab."""
from .accel import accelerate_for_cpu
from .utils import register_checkpoint_safe_globals
from .version import __version__

# Checkpoints written by mmengine's runner hold numpy values and history
# buffers; allow exactly those under torch's weights_only loading, so that
# resuming works without switching that safety off.
register_checkpoint_safe_globals()

__all__ = ['__version__', 'accelerate_for_cpu']
