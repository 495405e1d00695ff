from .pyramid_tnt import PyramidTNT
from .tnt import TNT
from .twins import PCPVT, SVT

__all__ = ['TNT', 'PCPVT', 'SVT', 'PyramidTNT']
