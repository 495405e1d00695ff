from .amp import (CPUAmpOptimWrapper, default_amp_dtype, enable_amp,
                  set_cuda_loss_scale)
from .compile_hook import CompileHook
from .layer_decay import LayerDecayOptimWrapperConstructor
from .schedulers import WarmupCosineLR

__all__ = [
    'CompileHook', 'CPUAmpOptimWrapper', 'LayerDecayOptimWrapperConstructor',
    'WarmupCosineLR', 'default_amp_dtype', 'enable_amp', 'set_cuda_loss_scale'
]
