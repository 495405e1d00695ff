"""The cache of converted checkpoints: one process per cache folder fetches
an entry, behind its file lock, while the others wait for its file."""
import contextlib
import glob
import hashlib
import json
import logging
import os
import os.path as osp
import shutil
import tempfile
import time
import urllib.error
import urllib.parse

import torch
from filelock import FileLock, Timeout

from .download import (CHUNK, PickledObjects, download, download_url,
                       error_reason, is_web_page, read_converted,
                       source_error)
from .index import resolve

#: Part of every cache name: raise it when a converter's output changes.
CONVERTER_VERSION = 1
WORK_PREFIX = '.download-'
# FAT's modification-time step, the coarsest of common file systems.
MTIME_STEP_NS = 2_000_000_000
#: Path -> ``(size, mtime_ns, sha256)`` of the files hashed by this process.
verified = {}

logger = logging.getLogger(__name__)


def cache_dir():
    """``$MMTNT_HOME/checkpoints``, by default
    ``~/.cache/mmtnt/checkpoints``."""
    home = os.environ.get('MMTNT_HOME',
                          osp.join(osp.expanduser('~'), '.cache', 'mmtnt'))
    return osp.join(home, 'checkpoints')


def cache_file(entry, source):
    """The cached, converted checkpoint of a source:
    ``CACHE/NAME@SOURCE-KEY.pth``, ``KEY`` a hash of the address, its
    SHA-256 and :data:`CONVERTER_VERSION`.

    Args:
        entry (dict): A :func:`~mmtnt.hub.model_index` entry.
        source (dict): One of its sources.

    Examples:
        >>> from mmtnt.hub import cache_file, resolve
        >>> cache_file(*resolve('twins-svt-small_8xb128_in1k'))[-22:]
        'in1k@timm-6954f72d.pth'
    """
    made_from = json.dumps(
        [source['url'], source['sha256'], CONVERTER_VERSION])
    key = hashlib.sha256(made_from.encode()).hexdigest()[:8]
    return osp.join(cache_dir(),
                    f'{entry["name"]}@{source["name"]}-{key}.pth')


def _beside(path, suffix):
    """``path`` with its ``.pth`` replaced by ``suffix``."""
    return osp.splitext(path)[0] + suffix


def _entry_name(path):
    """``NAME@SOURCE-KEY``, the name of a cache entry's files."""
    return osp.splitext(osp.basename(path))[0]


def file_sha256(path):
    """The SHA-256 of a file (hex)."""
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _has_sha256(path, sha256):
    """Whether ``path`` has the SHA-256 ``sha256``, hashed once per process
    while its size and mtime stay (only if written :data:`MTIME_STEP_NS`
    before, so that a later change shows in its mtime)."""
    stat = os.stat(path)
    state = (stat.st_size, stat.st_mtime_ns, sha256)
    if verified.get(path) == state:
        return True
    began = time.time_ns()
    if file_sha256(path) != sha256:
        return False
    if stat.st_mtime_ns < began - MTIME_STEP_NS:
        verified[path] = state
    return True


def _cache_problem(path):
    """What is wrong with a cached checkpoint against its ``.json``
    record, or None."""
    if not osp.isfile(path):
        return 'it is missing'
    try:
        with open(_beside(path, '.json')) as f:
            record = json.load(f)
        size, sha256 = record['size'], record['sha256']
    except (OSError, ValueError, KeyError, TypeError):
        return 'the record of what was written is missing or unreadable'
    if osp.getsize(path) != size:
        return f'it has {osp.getsize(path)} bytes, {size} were written'
    if not _has_sha256(path, sha256):
        return 'its SHA-256 is not the one recorded when it was written'
    return None


def _write_synced(path, write):
    """Write a file through ``write(f)``, then flush and sync it to disk."""
    with open(path, 'wb') as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def _store(checkpoint, work, path, made_from):
    """Save a checkpoint as the cache entry ``path``: written in ``work``,
    synced, read back, then renamed into place before its record."""
    partial = osp.join(work, 'converted.pth')
    _write_synced(partial, lambda f: torch.save(checkpoint, f))
    torch.load(partial, map_location='cpu', weights_only=True, mmap=True)
    record = dict(made_from, size=osp.getsize(partial),
                  sha256=file_sha256(partial))
    partial_record = osp.join(work, 'record.json')
    _write_synced(partial_record,
                  lambda f: f.write(json.dumps(record, indent=1).encode()))
    os.replace(partial, path)
    os.replace(partial_record, _beside(path, '.json'))


def _sweep(folder, path):
    """Remove the work folders that killed fetches left in ``folder``: those
    of ``path``'s entry (locked by us) and of entries no one locks."""
    own = _entry_name(path)
    for work in glob.glob(osp.join(folder, WORK_PREFIX + '*')):
        entry = osp.basename(work)[len(WORK_PREFIX):].rpartition('.')[0]
        if entry == own:
            shutil.rmtree(work, ignore_errors=True)
            continue
        try:
            with FileLock(osp.join(folder, f'{entry}.lock'), blocking=False):
                shutil.rmtree(work, ignore_errors=True)
        except (Timeout, OSError):  # in use, or not ours to touch
            pass


@contextlib.contextmanager
def _entry_lock(entry, source, path):
    """Hold the lock of a cache entry, making its folder."""
    folder = osp.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        lock = FileLock(_beside(path, '.lock'))
        lock.acquire()
    except OSError as error:
        raise source_error(entry, source, f'the cache folder {folder} cannot '
                           f'be written: {error_reason(error)}') from None
    try:
        yield
    finally:
        lock.release()


def _fetch(entry, source, path, progress):
    """Download, check, convert and cache a source as ``path``; any failure
    is a :class:`HubError`, leaving nothing in the cache."""
    url = download_url(source['url'])
    file_name = osp.basename(urllib.parse.urlsplit(url).path)
    folder = osp.dirname(path)
    try:
        work = tempfile.mkdtemp(
            prefix=f'{WORK_PREFIX}{_entry_name(path)}.', dir=folder)
    except OSError as error:
        raise source_error(entry, source, f'the cache folder {folder} cannot '
                           f'be written: {error_reason(error)}') from None
    try:
        raw = osp.join(work, file_name)
        stage = f'downloading {url} failed'
        sha256 = download(url, raw, source['sha256'], progress)
        stage = 'the downloaded file could not be read or converted'
        checkpoint = read_converted(entry, raw)
        stage = f'writing the cache folder {folder} failed'
        _store(checkpoint, work, path,
               dict(url=source['url'], source_sha256=sha256,
                    converter_version=CONVERTER_VERSION))
    except urllib.error.HTTPError as error:
        raise source_error(entry, source, f'{url} answered HTTP '
                           f'{error.code} {error.reason}') from None
    except PickledObjects as error:
        raise source_error(entry, source, f'{stage}: {error}',
                           allow_pickle=True) from None
    except Exception as error:  # the connection, the disk, a converter
        what = error_reason(error).replace(raw, file_name)
        raise source_error(entry, source, f'{stage}: {what}') from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _discard(entry, source, path):
    """Remove a damaged cache entry (the file and its record)."""
    try:
        for stale in (path, _beside(path, '.json')):
            if osp.lexists(stale):
                os.remove(stale)
    except OSError as error:
        raise source_error(entry, source, f'the damaged cached file {path} '
                           f'cannot be removed: {error_reason(error)}'
                           ) from None


def fetch_checkpoint(name, progress=True):
    """The converted checkpoint file of ``NAME[@SOURCE]``, fetched on first
    use; a damaged cached file is fetched again, with a warning.

    Args:
        name (str): ``[mmtnt://]NAME[@SOURCE]``.
        progress (bool): Show a download progress bar. Defaults to True.

    Raises:
        HubError: With what went wrong and the manual steps.

    Examples:
        >>> from mmtnt.hub import fetch_checkpoint
        >>> fetch_checkpoint('twins-svt-small_8xb128_in1k')  # doctest: +SKIP
        '.../checkpoints/twins-svt-small_8xb128_in1k@timm-6954f72d.pth'
    """
    entry, source = resolve(name)
    path = cache_file(entry, source)
    if _cache_problem(path) is None:
        return path
    if is_web_page(source['url']):
        raise source_error(entry, source, 'the address is a web page, not '
                           'a file that can be downloaded')
    with _entry_lock(entry, source, path):
        problem = _cache_problem(path)
        if problem is None:  # fetched by another process meanwhile
            return path
        if osp.exists(path):
            logger.warning(f'mmtnt: the cached {path} is damaged ({problem})'
                           '; fetching it again.')
            _discard(entry, source, path)
        _sweep(osp.dirname(path), path)
        _fetch(entry, source, path, progress)
    return path
