"""Published weights by name: the ``mmtnt://`` checkpoint scheme.

``mmtnt://NAME`` (or ``mmtnt://NAME@SOURCE``) names a model of mmtnt's
model index (``configs/*/metafile.yml``) and one of the public files it
converts from. Wherever mmengine loads a checkpoint (``load_from``,
``init_cfg=dict(type='Pretrained', checkpoint=...)``, ``tools/test.py CONFIG
CHECKPOINT``) the name works as a path does: on first use the file is
downloaded, its SHA-256 checked against the index and against what the
server announces, converted with the family's converter and cached under
``~/.cache/mmtnt/checkpoints`` (``$MMTNT_HOME/checkpoints`` when
``MMTNT_HOME`` is set); later uses read the cache.

A model's sources are listed in its metafile entry, under
``Converted From: Sources:``, each with a ``Name``, the ``Weights`` address
and, where the publisher gives it, ``SHA256`` (the whole digest, or the
leading hex digits that OpenMMLab download names end with). The first
source is the default. ``MMTNT_WEIGHTS_MIRROR=BASE`` fetches each address
``https://HOST/PATH`` from ``BASE/HOST/PATH`` instead (a local mirror).

The cache is shared safely: one process per cache folder (one per node
under torchrun or Slurm) downloads and converts, behind a file lock, while
the others wait and then read its file. A cached file is named by its
source's address and hash and :data:`CONVERTER_VERSION`, is written under a
temporary name, synced and renamed, and is checked against the size and
SHA-256 recorded beside it before each use; a damaged one is fetched again.

Any failure (no direct address, no network, an HTTP error, a wrong hash, a
truncated or unreadable file, a cache folder that cannot be written) raises
one :class:`HubError` whose message names the model and the address, says
what went wrong and gives the commands that do the same by hand.
"""
import contextlib
import functools
import glob
import hashlib
import http.client
import importlib.abc
import importlib.util
import json
import logging
import os
import os.path as osp
import pickle
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import torch
import yaml
from filelock import FileLock, Timeout

from .utils import check_checkpoint_file

SCHEME = 'mmtnt://'
# The converter and its command line of each collection of the index.
FAMILIES = {
    'TNT': ('convert_tnt', 'tnt2mmtnt.py'),
    'PyramidTNT': ('convert_pyramid_tnt', 'pyramid_tnt2mmtnt.py'),
    'Twins': ('convert_twins', 'twins2mmtnt.py'),
}
# Hosts whose addresses are pages to click through, not files.
PAGE_HOSTS = ('drive.google.com', 'pan.baidu.com')
CHUNK = 1 << 20
#: The version of what the converters write, part of every cache name:
#: raise it when a converter's output changes, so that no cache made by the
#: old converter is read again.
CONVERTER_VERSION = 1
# The prefix of the temporary folders that fetches download and convert in.
WORK_PREFIX = '.download-'
# A SHA-256 as servers announce it in ETag headers.
SHA256_TAG = re.compile(r'(?:W/)?"?([0-9a-fA-F]{64})"?')

logger = logging.getLogger(__name__)


class HubError(RuntimeError):
    """Published weights that could not be fetched, checked or converted.

    The message is meant for the user as it is: the model, the address,
    what went wrong and the commands that do it by hand.
    """


def index_file():
    """The model index: ``mmtnt/.mim/model-index.yml`` of an installed
    package, else ``model-index.yml`` of the source tree.

    Returns:
        str: Its path.
    """
    package = osp.dirname(osp.abspath(__file__))
    for root in (osp.join(package, '.mim'), osp.dirname(package)):
        path = osp.join(root, 'model-index.yml')
        if osp.isfile(path):
            return path
    raise HubError(f'mmtnt has no model index next to {package}.')


@functools.lru_cache(maxsize=None)
def model_index():
    """Every model of the index, by name.

    Returns:
        dict[str, dict]: For each model: ``name``, ``config`` (an absolute
        path), ``family`` (its collection: ``TNT``, ``PyramidTNT`` or
        ``Twins``), ``tasks`` (those of its results, else of its training
        data) and ``sources`` (each a dict of ``name``, ``url`` and
        ``sha256``, None when not recorded; the default first).

    Examples:
        >>> from mmtnt.hub import model_index
        >>> entry = model_index()['twins-svt-small_8xb128_in1k']
        >>> [source['name'] for source in entry['sources']]
        ['timm', 'mmpretrain', 'official']
    """
    path = index_file()
    root = osp.dirname(path)
    with open(path) as f:
        imports = yaml.safe_load(f)['Import']
    models = {}
    for metafile in imports:
        with open(osp.join(root, metafile)) as f:
            for model in yaml.safe_load(f)['Models']:
                models[model['Name']] = _index_entry(model, root)
    return models


def _index_entry(model, root):
    """One model of a metafile as :func:`model_index` gives it."""
    converted = model.get('Converted From') or {}
    sources = converted.get('Sources')
    if sources is None and 'Weights' in converted:
        sources = [dict(Name='official', Weights=converted['Weights'])]
    return dict(
        name=model['Name'],
        config=osp.join(root, model['Config']),
        family=model['In Collection'],
        tasks=_tasks(model),
        sources=[
            dict(
                name=source['Name'],
                url=source['Weights'],
                sha256=source.get('SHA256')) for source in sources or []
        ])


# The tasks of a model without published results, by its training data.
DATA_TASKS = {
    'ImageNet-1k': ['Image Classification'],
    'COCO': ['Object Detection'],
    'ADE20K': ['Semantic Segmentation'],
}


def _tasks(model):
    """The tasks of a metafile model: those of its results, else those of
    its training data (and instance segmentation for Mask R-CNN)."""
    tasks = [result['Task'] for result in model.get('Results', [])]
    if tasks:
        return list(dict.fromkeys(tasks))
    tasks = list(DATA_TASKS[model['Metadata']['Training Data']])
    if 'Mask R-CNN' in model['Metadata'].get('Architecture', []):
        tasks.append('Instance Segmentation')
    return tasks


def resolve(name):
    """Find a model and one of its sources by ``NAME[@SOURCE]``.

    Args:
        name (str): A model name of the index, with ``mmtnt://`` or not,
            optionally followed by ``@SOURCE``.

    Returns:
        tuple[dict, dict]: The :func:`model_index` entry and the source
        (the default one when none is named).

    Raises:
        HubError: For an unknown model, a model without published weights
            or an unknown source.
    """
    name = name[len(SCHEME):] if name.startswith(SCHEME) else name
    model_name, _, source_name = name.partition('@')
    entry = model_index().get(model_name)
    if entry is None:
        raise HubError(f'{SCHEME}{name}: no model {model_name!r} in mmtnt\'s '
                       'model index; mmtnt.apis.list_models() lists them.')
    if not entry['sources']:
        raise HubError(
            f'{SCHEME}{name}: {model_name} has no published weights to '
            'convert: train it, or load the weights of its backbone.')
    if not source_name:
        return entry, entry['sources'][0]
    for source in entry['sources']:
        if source['name'] == source_name:
            return entry, source
    names = ', '.join(source['name'] for source in entry['sources'])
    raise HubError(f'{SCHEME}{name}: {model_name} has no source '
                   f'{source_name!r}; its sources are {names} (the first '
                   'is the default).')


def cache_dir():
    """Where converted checkpoints are cached.

    Returns:
        str: ``$MMTNT_HOME/checkpoints``, by default
        ``~/.cache/mmtnt/checkpoints``.
    """
    home = os.environ.get('MMTNT_HOME',
                          osp.join(osp.expanduser('~'), '.cache', 'mmtnt'))
    return osp.join(home, 'checkpoints')


def cache_file(entry, source):
    """The cached, converted checkpoint of a source.

    Its name carries a key made of the source's address, the SHA-256 the
    index records for it and :data:`CONVERTER_VERSION`: a changed address
    or hash, or a fixed converter, gives a new file.

    Args:
        entry (dict): A :func:`model_index` entry.
        source (dict): One of its sources.

    Returns:
        str: ``CACHE/NAME@SOURCE-KEY.pth`` (:func:`cache_dir`), ``KEY``
        eight hex digits.

    Examples:
        >>> from mmtnt.hub import cache_file, resolve
        >>> cache_file(*resolve('twins-svt-small_8xb128_in1k'))
        ... # doctest: +SKIP
        '~/.cache/mmtnt/checkpoints/twins-svt-small_8xb128_in1k@timm-6954f72d.pth'
    """
    made_from = json.dumps(
        [source['url'], source['sha256'], CONVERTER_VERSION])
    key = hashlib.sha256(made_from.encode()).hexdigest()[:8]
    return osp.join(cache_dir(),
                    f'{entry["name"]}@{source["name"]}-{key}.pth')


def _beside(path, suffix):
    """``path`` with its ``.pth`` replaced by ``suffix``: the record
    (``.json``) and the lock (``.lock``) of a cache entry."""
    return osp.splitext(path)[0] + suffix


def _entry_name(path):
    """``NAME@SOURCE-KEY``, the name of a cache entry's files."""
    return osp.splitext(osp.basename(path))[0]


def download_url(url):
    """The address a source is fetched from: ``url``, or its copy under
    ``$MMTNT_WEIGHTS_MIRROR`` (``BASE/HOST/PATH``) when that is set."""
    mirror = os.environ.get('MMTNT_WEIGHTS_MIRROR')
    if not mirror:
        return url
    parts = urllib.parse.urlsplit(url)
    return f'{mirror.rstrip("/")}/{parts.netloc}{parts.path}'


def manual_steps(entry, source, allow_pickle=False):
    """The commands that fetch and convert a source by hand.

    Args:
        entry (dict): A :func:`model_index` entry.
        source (dict): One of its sources.
        allow_pickle (bool): Convert with ``--allow-pickle`` (a file that
            pickles more than tensors). Defaults to False.

    Returns:
        str: Numbered lines, ending with the checkpoint to load.
    """
    url = source['url']
    file_name = osp.basename(urllib.parse.urlsplit(url).path)
    dst = f'checkpoints/{entry["name"]}.pth'
    script = FAMILIES[entry['family']][1]
    if urllib.parse.urlsplit(url).netloc in PAGE_HOSTS:
        steps = [f'open {url} in a browser and save the file']
        file_name = 'THE_SAVED_FILE'
    else:
        steps = [f'wget {url}']
    if file_name.endswith('.safetensors'):
        steps.append(
            'python -c "import torch; from safetensors.torch import '
            f"load_file; torch.save(load_file('{file_name}'), "
            "'model.pth')\"")
        file_name = 'model.pth'
    trusted = ' --allow-pickle' if allow_pickle else ''
    steps.append(f'python tools/model_converters/{script} {file_name} '
                 f'{dst}{trusted}')
    lines = [f'  {i}. {step}' for i, step in enumerate(steps, 1)]
    return '\n'.join(['To do it by hand:'] + lines +
                     [f'then load {dst} in place of {SCHEME}{entry["name"]}.'])


class _PickledObjects(ValueError):
    """A download that pickles objects other than tensors."""


def _fail(entry, source, what, allow_pickle=False):
    """A :class:`HubError` with the model, the address, ``what`` went
    wrong and the manual steps."""
    steps = manual_steps(entry, source, allow_pickle)
    return HubError(f'Cannot get the weights of {entry["name"]} '
                    f'(source {source["name"]}) from {source["url"]}: '
                    f'{what}.\n{steps}')


def _reason(error):
    """What an error says: the system's words for an ``OSError`` (that of
    a ``URLError``'s reason included), else its message."""
    reason = getattr(error, 'reason', None)
    reason = error if reason is None else reason
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason)


class _RecordRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects as urllib does, keeping each redirect answer's
    headers: Hugging Face announces a file's SHA-256 (``X-Linked-Etag``)
    in the redirect to its storage, not in the storage's answer."""

    def __init__(self):
        self.headers = []

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.headers.append(headers)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def announced_sha256(headers):
    """The SHA-256 that a server announces for the file it sends.

    Args:
        headers (list[Message]): The headers of each answer, the first
            server's first (redirects, then the file).

    Returns:
        str | None: The lowercase hex digest of the first ``X-Linked-Etag``
        or ``ETag`` that is one (64 hex digits, quoted or not), else None.

    Examples:
        >>> from email.message import Message
        >>> answer = Message()
        >>> answer['ETag'] = '"' + 'ab' * 32 + '"'
        >>> announced_sha256([answer]) == 'ab' * 32
        True
    """
    for answer in headers:
        for name in ('X-Linked-Etag', 'ETag'):
            match = SHA256_TAG.fullmatch(answer.get(name, '').strip())
            if match:
                return match.group(1).lower()
    return None


def _check_sha256(digest, recorded, announced):
    """Raise ``ValueError`` unless ``digest`` is what the index records
    (whole or leading digits) and what the server announced."""
    if recorded is not None and not digest.startswith(recorded.lower()):
        raise ValueError(f'its SHA-256 is {digest}, the index records '
                         f'{recorded} (a wrong or changed file)')
    if announced is not None and digest != announced:
        raise ValueError(f'its SHA-256 is {digest}, the server announced '
                         f'{announced} (a damaged or changed file)')


def _download(url, dst, sha256=None, progress=True):
    """Download ``url`` to ``dst``, checking its length and hash.

    Args:
        url (str): The address.
        dst (str): The file to write.
        sha256 (str, optional): The whole hex digest or its first digits.
        progress (bool): Show a progress bar. Defaults to True.

    Returns:
        str: The SHA-256 of the file (hex).

    Raises:
        OSError: From the connection (``urllib.error.URLError`` included)
            or the disk.
        ValueError: For a file shorter than announced, a chunked answer
            cut short or a hash other than the index's or the server's.
    """
    from tqdm import tqdm

    redirects = _RecordRedirects()
    request = urllib.request.Request(url, headers={'User-Agent': 'mmtnt'})
    digest = hashlib.sha256()
    done = 0
    with urllib.request.build_opener(redirects).open(
            request, timeout=60) as response, open(dst, 'wb') as f:
        size = response.headers.get('Content-Length')
        size = int(size) if size is not None else None
        with tqdm(total=size, disable=not progress, unit='B',
                  unit_scale=True, unit_divisor=1024,
                  desc=osp.basename(dst)) as bar:
            try:
                while chunk := response.read(CHUNK):
                    f.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    bar.update(len(chunk))
            except http.client.IncompleteRead as error:  # chunked, cut
                done += len(error.partial)
                raise ValueError(f'the download stopped after {done} bytes, '
                                 'before the end of the file (truncated)'
                                 ) from None
        announced = announced_sha256(redirects.headers + [response.headers])
    if size is not None and done != size:
        raise ValueError(f'the download stopped after {done} of {size} '
                         'bytes (truncated)')
    _check_sha256(digest.hexdigest(), sha256, announced)
    return digest.hexdigest()


def _read_source(path):
    """Load a downloaded file: safetensors, or a torch checkpoint with
    ``weights_only``.

    Raises:
        _PickledObjects: For a checkpoint that pickles more than tensors,
            naming the objects.
    """
    if path.endswith('.safetensors'):
        from safetensors.torch import load_file
        return load_file(path)
    from .converters.common import load_checkpoint_file
    try:
        return load_checkpoint_file(path)
    except RuntimeError as error:
        if not isinstance(error.__cause__, pickle.UnpicklingError):
            raise
        found = _unsafe_globals(path)
        raise _PickledObjects(
            f'it pickles objects other than tensors ({found}), which mmtnt '
            'does not unpickle from a download') from None


def _unsafe_globals(path):
    """The Python objects that a checkpoint pickles beside its tensors and
    that ``weights_only`` loading refuses, as one string."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # torch's legacy format: no list without unpickling
        return 'in the legacy format, not listed'
    return ', '.join(names)


def _convert(entry, checkpoint):
    """Convert a loaded source with the family's converter."""
    from . import converters
    return getattr(converters, FAMILIES[entry['family']][0])(checkpoint)


def _file_sha256(path):
    """The SHA-256 of a file (hex)."""
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _cache_problem(path):
    """What is wrong with a cached checkpoint.

    It must be there and have the size and SHA-256 that its record (the
    ``.json`` beside it, written with it) gives.

    Args:
        path (str): The cached file (:func:`cache_file`).

    Returns:
        str | None: The problem, or None for a file that can be used.
    """
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
    if _file_sha256(path) != sha256:
        return 'its SHA-256 is not the one recorded when it was written'
    return None


def _write_synced(path, write):
    """Write a file through ``write(f)``, then flush and sync it to disk."""
    with open(path, 'wb') as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def _store(checkpoint, work, path, made_from):
    """Save a converted checkpoint as the cache entry ``path``.

    The file is written in ``work``, synced and read back as the loader
    reads it (``weights_only``); its record (size, SHA-256 and
    ``made_from``) is written beside it; both are then renamed into
    place, the file first.

    Raises:
        OSError: From the disk.
    """
    partial = osp.join(work, 'converted.pth')
    _write_synced(partial, lambda f: torch.save(checkpoint, f))
    torch.load(partial, map_location='cpu', weights_only=True, mmap=True)
    record = dict(made_from, size=osp.getsize(partial),
                  sha256=_file_sha256(partial))
    partial_record = osp.join(work, 'record.json')
    _write_synced(partial_record,
                  lambda f: f.write(json.dumps(record, indent=1).encode()))
    os.replace(partial, path)
    os.replace(partial_record, _beside(path, '.json'))


def _sweep(folder, path):
    """Remove the temporary folders that killed fetches left in ``folder``:
    those of ``path``'s entry, whose lock this process holds, and those of
    entries whose lock no process holds.

    A folder is named ``.download-NAME@SOURCE-KEY.RANDOM``.
    """
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
    """Hold the lock of a cache entry (``NAME@SOURCE-KEY.lock``), its folder
    made, for the one process that fetches it.

    Raises:
        HubError: When the cache folder cannot be made or written.
    """
    folder = osp.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        lock = FileLock(_beside(path, '.lock'))
        lock.acquire()
    except OSError as error:
        raise _fail(entry, source, f'the cache folder {folder} cannot be '
                    f'written: {_reason(error)}') from None
    try:
        yield
    finally:
        lock.release()


def _fetch(entry, source, path, progress):
    """Download, check, convert and cache a source as ``path``.

    Raises:
        HubError: For any failure, with nothing left in the cache.
    """
    url = download_url(source['url'])
    file_name = osp.basename(urllib.parse.urlsplit(url).path)
    folder = osp.dirname(path)
    try:
        work = tempfile.mkdtemp(
            prefix=f'{WORK_PREFIX}{_entry_name(path)}.', dir=folder)
    except OSError as error:
        raise _fail(entry, source, f'the cache folder {folder} cannot be '
                    f'written: {_reason(error)}') from None
    try:
        raw = osp.join(work, file_name)
        stage = f'downloading {url} failed'
        sha256 = _download(url, raw, source['sha256'], progress)
        stage = 'the downloaded file could not be read or converted'
        checkpoint = _convert(entry, _read_source(raw))
        stage = f'writing the cache folder {folder} failed'
        _store(checkpoint, work, path,
               dict(url=source['url'], source_sha256=sha256,
                    converter_version=CONVERTER_VERSION))
    except urllib.error.HTTPError as error:
        raise _fail(entry, source, f'{url} answered HTTP {error.code} '
                    f'{error.reason}') from None
    except _PickledObjects as error:
        raise _fail(entry, source, f'{stage}: {error}',
                    allow_pickle=True) from None
    except Exception as error:  # the connection, the disk, a converter
        what = _reason(error).replace(raw, file_name)
        raise _fail(entry, source, f'{stage}: {what}') from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _discard(entry, source, path):
    """Remove a damaged cache entry (the file and its record)."""
    try:
        for stale in (path, _beside(path, '.json')):
            if osp.lexists(stale):
                os.remove(stale)
    except OSError as error:
        raise _fail(entry, source, f'the damaged cached file {path} cannot '
                    f'be removed: {_reason(error)}') from None


def fetch_checkpoint(name, progress=True):
    """The converted checkpoint of ``NAME[@SOURCE]``, fetched on first use.

    A cached file is used when it has the size and SHA-256 recorded when
    it was written. Otherwise one process fetches it, holding the entry's
    lock, while others that ask for the same entry wait and then use its
    file; a damaged file is fetched again, with one warning saying so.

    Args:
        name (str): ``[mmtnt://]NAME[@SOURCE]``, ``NAME`` from the model
            index.
        progress (bool): Show a download progress bar. Defaults to True.

    Returns:
        str: The cached, converted checkpoint file.

    Raises:
        HubError: With the model, the address, what went wrong and the
            manual steps.

    Examples:
        >>> from mmtnt.hub import fetch_checkpoint
        >>> fetch_checkpoint('twins-svt-small_8xb128_in1k')  # doctest: +SKIP
        '~/.cache/mmtnt/checkpoints/twins-svt-small_8xb128_in1k@timm-6954f72d.pth'
    """
    entry, source = resolve(name)
    path = cache_file(entry, source)
    if _cache_problem(path) is None:
        return path
    if urllib.parse.urlsplit(source['url']).netloc in PAGE_HOSTS:
        raise _fail(entry, source, 'the address is a web page, not a file '
                    'that can be downloaded')
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


def load_from_mmtnt(filename, map_location=None):
    """mmengine's loader of ``mmtnt://NAME[@SOURCE]`` checkpoints.

    Args:
        filename (str): The checkpoint name.
        map_location (str | torch.device, optional): As ``torch.load``.

    Returns:
        dict: The converted checkpoint (``state_dict`` and ``meta``).

    Raises:
        HubError: As :func:`fetch_checkpoint`, without the exception
            chain, so that the message is all a user reads.
    """
    try:
        path = fetch_checkpoint(filename)
    except HubError as error:
        raise HubError(str(error)) from None
    return torch.load(path, map_location=map_location, weights_only=True)


def prepare_checkpoint(checkpoint):
    """Make ``checkpoint`` ready for mmengine's loader, or raise one
    readable error: a ``mmtnt://`` name is fetched into the cache (its
    download and conversion fail with :class:`HubError`), a local file is
    checked (:func:`mmtnt.utils.check_checkpoint_file`).

    Args:
        checkpoint (str | None): What the runner will load.

    Raises:
        CheckpointFileError: For a local file that cannot be a checkpoint.
        HubError: For a published checkpoint that cannot be fetched.

    Examples:
        >>> from mmtnt.hub import prepare_checkpoint
        >>> prepare_checkpoint(None)  # nothing to load, nothing to check
        >>> prepare_checkpoint('mmtnt://tnt-s-p16_16xb64_in1k')
        ... # doctest: +SKIP
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
    """Runs :func:`_register` once ``mmengine.runner.checkpoint`` has been
    imported, so that ``import mmtnt`` does not import mmengine's runner
    (seconds) for a scheme that only its loaders use."""

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


_CHECKPOINT_MODULE = 'mmengine.runner.checkpoint'


def register_hub_scheme():
    """Register ``mmtnt://`` with mmengine's ``CheckpointLoader``: now if
    mmengine's runner is imported, else as soon as it is."""
    if _CHECKPOINT_MODULE in sys.modules:
        _register()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
