"""mmtnt: TNT, PyramidTNT and Twins backbones for OpenMMLab."""
from .version import __version__

__all__ = ['__version__']
