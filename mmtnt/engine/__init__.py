from .compile_hook import CompileHook
from .layer_decay import LayerDecayOptimWrapperConstructor
from .optim_wrapper import CPUAmpOptimWrapper

__all__ = [
    'CompileHook', 'CPUAmpOptimWrapper', 'LayerDecayOptimWrapperConstructor'
]
