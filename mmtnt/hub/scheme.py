"""``mmtnt://NAME[@SOURCE]`` in mmengine's loaders, and the check of a
checkpoint before it is loaded."""
import importlib.abc
import importlib.util
import sys

import torch

from ..utils import check_checkpoint_file
from .cache import fetch_checkpoint
from .index import SCHEME

_CHECKPOINT_MODULE = 'mmengine.runner.checkpoint'


def load_from_mmtnt(filename, map_location=None):
    """mmengine's loader of ``mmtnt://NAME[@SOURCE]`` checkpoints."""
    path = fetch_checkpoint(filename)
    return torch.load(path, map_location=map_location, weights_only=True)


def prepare_checkpoint(checkpoint):
    """Make ``checkpoint`` (str or None) ready for mmengine's loader, or
    raise one readable error: a ``mmtnt://`` name is fetched, a file is
    checked.

    Examples:
        >>> from mmtnt.hub import prepare_checkpoint
        >>> prepare_checkpoint(None)  # nothing to load, nothing to check
    """
    if str(checkpoint).startswith(SCHEME):
        fetch_checkpoint(checkpoint)
        return
    check_checkpoint_file(checkpoint)


def _register():
    from mmengine.runner.checkpoint import CheckpointLoader
    CheckpointLoader.register_scheme(
        prefixes=SCHEME, loader=load_from_mmtnt, force=True)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs :func:`_register` once ``mmengine.runner.checkpoint`` is
    imported, so that ``import mmtnt`` does not import mmengine's runner."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _CHECKPOINT_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        exec_module = spec.loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            _register()

        spec.loader.exec_module = exec_and_register
        return spec


def register_hub_scheme():
    """Register ``mmtnt://`` with mmengine's ``CheckpointLoader``: now if
    mmengine's runner is imported, else as soon as it is (configs name
    ``mmtnt://`` checkpoints with no call into mmtnt first)."""
    if _CHECKPOINT_MODULE in sys.modules:
        _register()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
