"""Checkpoints of mmengine's runner under ``torch.load(weights_only=True)``,
and a quick check that a file can be a checkpoint at all.

A runner's checkpoint holds numpy values and :class:`HistoryBuffer` objects,
which pickle ``getattr(HistoryBuffer, 'min')``; ``getattr`` is never
allowlisted: its name is bound to :func:`history_buffer_attribute`.
"""
import io
import os.path as osp
import pickle
import pickletools
import zipfile

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

# The statistic functions a HistoryBuffer pickles with itself.
HISTORY_BUFFER_STATISTICS = ('min', 'max', 'current', 'mean')
# Data types of the numpy arrays and scalars that logs and metrics hold.
NUMPY_DTYPES = ('bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16',
                'uint32', 'uint64', 'float16', 'float32', 'float64')


def history_buffer_attribute(owner, name):
    """``getattr`` while unpickling: ``HistoryBuffer.<name>`` for the names
    of ``HISTORY_BUFFER_STATISTICS``, UnpicklingError for anything else."""
    if owner is not HistoryBuffer or name not in HISTORY_BUFFER_STATISTICS:
        raise pickle.UnpicklingError(
            f'Refusing getattr({owner!r}, {name!r}) while loading a '
            'checkpoint: only the statistic functions of HistoryBuffer are '
            'allowed.')
    return getattr(owner, name)


def _numpy_multiarray():
    """numpy's ``multiarray`` module (under ``numpy._core`` from 2.0)."""
    core = getattr(np, '_core', None) or np.core
    return core.multiarray


def checkpoint_safe_globals():
    """The globals mmengine's checkpoints need, as entries for
    :func:`torch.serialization.add_safe_globals` (numpy 1 and 2 paths)."""
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
    """Let ``torch.load(weights_only=True)`` read mmengine's checkpoints
    (:func:`checkpoint_safe_globals`); calling it again is harmless."""
    torch.serialization.add_safe_globals(checkpoint_safe_globals())


class CheckpointFileError(ValueError):
    """A checkpoint file that is missing, truncated or not a checkpoint."""


def _structure_problem(path):
    """What makes the existing file ``path`` no torch checkpoint, or None."""
    if osp.getsize(path) == 0:
        return 'it is empty'
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile as error:
            return f'a broken zip archive: {error}'
        if not any(name.split('/')[-1] == 'data.pkl' for name in names):
            return 'a zip archive without the data.pkl of torch.save'
        return None
    with open(path, 'rb') as f:
        # The pickled magic number takes 15 (protocol 2, 3) or 24 bytes.
        head = f.read(64)
    if head.startswith(b'PK\x03\x04'):
        return 'a zip archive, as torch.save writes, whose end is missing'
    try:
        first = [arg for _, arg, _ in pickletools.genops(io.BytesIO(head))]
    except ValueError:
        first = []
    if torch.serialization.MAGIC_NUMBER not in first:
        return ('neither a zip archive nor torch\'s legacy format: it begins '
                f'with {head[:16]!r}')
    return None


def check_checkpoint_file(path):
    """Raise a one-line error if ``path`` cannot be a torch checkpoint.

    Only the structure is read (a zip archive with ``data.pkl``, or torch's
    legacy magic number), so the check is quick and runs no pickled code.

    Args:
        path (str | None): A local file; a URL or None is not checked.

    Raises:
        CheckpointFileError: ``cannot read checkpoint PATH: WHAT``.

    Examples:
        >>> try:  # doctest: +NORMALIZE_WHITESPACE
        ...     check_checkpoint_file('README.md')
        ... except CheckpointFileError as error:
        ...     print(error)
        cannot read checkpoint README.md: the file is truncated or not a
        PyTorch checkpoint (neither a zip archive nor torch's legacy format:
        it begins with b'# mmtnt\\n\\nmmtnt i')
    """
    if path is None or '://' in str(path):
        return
    prefix = f'cannot read checkpoint {path}'
    if not osp.isfile(path):
        what = 'it is a directory' if osp.isdir(path) else 'no such file'
        raise CheckpointFileError(f'{prefix}: {what}')
    try:
        problem = _structure_problem(path)
    except OSError as error:
        raise CheckpointFileError(f'{prefix}: {error.strerror}') from error
    if problem is not None:
        raise CheckpointFileError(
            f'{prefix}: the file is truncated or not a PyTorch checkpoint '
            f'({problem})')


def checkpoint_to_load(cfg):
    """The checkpoint mmengine's runner will load for ``cfg`` (``work_dir``
    set), as ``Runner.load_or_resume`` decides; None when it loads none."""
    if cfg.get('load_from') or not cfg.get('resume', False):
        return cfg.get('load_from')
    if not osp.isfile(osp.join(cfg.work_dir, 'last_checkpoint')):
        return None
    from mmengine.runner import find_latest_checkpoint
    return find_latest_checkpoint(cfg.work_dir)
