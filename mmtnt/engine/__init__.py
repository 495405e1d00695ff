from .optim_wrapper import OPTIM_WRAPPERS, CPUAmpOptimWrapper

__all__ = ['OPTIM_WRAPPERS', 'CPUAmpOptimWrapper']
