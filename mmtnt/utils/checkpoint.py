"""Loading mmengine's checkpoints with ``torch.load(weights_only=True)``.

Since PyTorch 2.6 ``torch.load`` only unpickles tensors, containers and
allowlisted globals by default. A checkpoint written by mmengine's runner
holds more: numpy arrays and scalars (in ``meta`` and the message hub) and
the message hub's :class:`HistoryBuffer` objects, which carry their
statistic functions (``HistoryBuffer.min``, ...), pickled as
``getattr(HistoryBuffer, 'min')``. :func:`register_checkpoint_safe_globals`
allowlists exactly these, so that resuming works while ``weights_only``
stays on. ``getattr`` itself is never allowlisted: the name ``getattr`` is
bound to :func:`history_buffer_attribute`, which only returns those
statistic functions.
"""
import pickle

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

# The statistic functions a HistoryBuffer pickles with itself.
HISTORY_BUFFER_STATISTICS = ('min', 'max', 'current', 'mean')
# Data types of the numpy arrays and scalars that logs and metrics hold.
NUMPY_DTYPES = ('bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16',
                'uint32', 'uint64', 'float16', 'float32', 'float64')


def history_buffer_attribute(owner, name):
    """Stand-in for ``getattr`` while unpickling a :class:`HistoryBuffer`.

    Args:
        owner (type): Must be :class:`HistoryBuffer`.
        name (str): One of ``HISTORY_BUFFER_STATISTICS``.

    Returns:
        function: ``HistoryBuffer.<name>``.

    Raises:
        pickle.UnpicklingError: For any other object or attribute.
    """
    if owner is not HistoryBuffer or name not in HISTORY_BUFFER_STATISTICS:
        raise pickle.UnpicklingError(
            f'Refusing getattr({owner!r}, {name!r}) while loading a '
            'checkpoint: only the statistic functions of HistoryBuffer are '
            'allowed.')
    return getattr(owner, name)


def _numpy_multiarray():
    """Return numpy's ``multiarray`` module (``numpy._core`` from 2.0)."""
    core = getattr(np, '_core', None) or np.core
    return core.multiarray


def checkpoint_safe_globals():
    """List the globals that mmengine's checkpoints need, for torch.

    numpy's array and scalar reconstructors are listed under both module
    paths (``numpy._core`` of numpy 2, ``numpy.core`` of numpy 1), so
    checkpoints written with either numpy load; the data types are the
    numeric ones of ``NUMPY_DTYPES`` (no object, string or record types).

    Returns:
        list: Entries for :func:`torch.serialization.add_safe_globals`:
        objects, or ``(object, 'module.name')`` pairs.
    """
    multiarray = _numpy_multiarray()
    numpy_functions = [(getattr(multiarray,
                                name), f'numpy.{core}.multiarray.{name}')
                       for name in ('_reconstruct', 'scalar')
                       for core in ('_core', 'core')]
    return [
        np.ndarray,
        np.dtype,
        *[type(np.dtype(name)) for name in NUMPY_DTYPES],
        *numpy_functions,
        HistoryBuffer,
        (history_buffer_attribute, 'builtins.getattr'),
    ]


def register_checkpoint_safe_globals():
    """Let ``torch.load(weights_only=True)`` read mmengine's checkpoints.

    Adds :func:`checkpoint_safe_globals` to torch's allowlist; calling it
    again is harmless.
    """
    torch.serialization.add_safe_globals(checkpoint_safe_globals())
