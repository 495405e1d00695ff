from .compile_hook import CompileHook
from .optim_wrapper import CPUAmpOptimWrapper

__all__ = ['CompileHook', 'CPUAmpOptimWrapper']
