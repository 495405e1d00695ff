from .optim_wrapper import CPUAmpOptimWrapper

__all__ = ['CPUAmpOptimWrapper']
