from .tnt import TNT

__all__ = ['TNT']
