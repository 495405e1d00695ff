"""Published weights by name: the ``mmtnt://`` checkpoint scheme.

``mmtnt://NAME`` (or ``mmtnt://NAME@SOURCE``) names a model of mmtnt's
model index (``configs/*/metafile.yml``) and one of the public files it
converts from. Wherever mmengine loads a checkpoint (``load_from``,
``init_cfg=dict(type='Pretrained', checkpoint=...)``, ``tools/test.py CONFIG
CHECKPOINT``) the name works as a path does: on first use the file is
downloaded, its SHA-256 checked where the index records one, converted with
the family's converter and cached under ``~/.cache/mmtnt/checkpoints``
(``$MMTNT_HOME/checkpoints`` when ``MMTNT_HOME`` is set); later uses read
the cache.

A model's sources are listed in its metafile entry, under
``Converted From: Sources:``, each with a ``Name``, the ``Weights`` address
and, where the publisher gives it, ``SHA256`` (the whole digest, or the
leading hex digits that OpenMMLab download names end with). The first
source is the default. ``MMTNT_WEIGHTS_MIRROR=BASE`` fetches each address
``https://HOST/PATH`` from ``BASE/HOST/PATH`` instead (a local mirror).

Any failure (no direct address, no network, an HTTP error, a wrong hash, a
truncated or unreadable file) raises one :class:`HubError` whose message
names the model and the address, says what went wrong and gives the
commands that do the same by hand. Nothing half-written is left in the
cache: files are written under a temporary name and renamed.
"""
import functools
import hashlib
import importlib.abc
import importlib.util
import os
import os.path as osp
import pickle
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import torch
import yaml

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
# Sources whose training-script files pickle arguments beside the weights
# (docs/model_zoo.md): the hub loads with weights_only and refuses them;
# by hand, the converter reads them with --allow-pickle.
PICKLED = ('official', 'contrastive')


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


def download_url(url):
    """The address a source is fetched from: ``url``, or its copy under
    ``$MMTNT_WEIGHTS_MIRROR`` (``BASE/HOST/PATH``) when that is set."""
    mirror = os.environ.get('MMTNT_WEIGHTS_MIRROR')
    if not mirror:
        return url
    parts = urllib.parse.urlsplit(url)
    return f'{mirror.rstrip("/")}/{parts.netloc}{parts.path}'


def manual_steps(entry, source):
    """The commands that fetch and convert a source by hand.

    Args:
        entry (dict): A :func:`model_index` entry.
        source (dict): One of its sources.

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
    trusted = ' --allow-pickle' if source['name'] in PICKLED else ''
    steps.append(f'python tools/model_converters/{script} {file_name} '
                 f'{dst}{trusted}')
    lines = [f'  {i}. {step}' for i, step in enumerate(steps, 1)]
    return '\n'.join(['To do it by hand:'] + lines +
                     [f'then load {dst} in place of {SCHEME}{entry["name"]}.'])


def _fail(entry, source, what):
    """A :class:`HubError` with the model, the address, ``what`` went
    wrong and the manual steps."""
    return HubError(f'Cannot get the weights of {entry["name"]} '
                    f'(source {source["name"]}) from {source["url"]}: '
                    f'{what}.\n{manual_steps(entry, source)}')


def _download(url, dst, sha256=None, progress=True):
    """Download ``url`` to ``dst``, checking its length and hash.

    Args:
        url (str): The address.
        dst (str): The file to write.
        sha256 (str, optional): The whole hex digest or its first digits.
        progress (bool): Show a progress bar. Defaults to True.

    Raises:
        OSError: From the connection (``urllib.error.URLError`` included).
        ValueError: For a file shorter than announced or a wrong hash.
    """
    from tqdm import tqdm

    request = urllib.request.Request(url, headers={'User-Agent': 'mmtnt'})
    digest = hashlib.sha256()
    with urllib.request.urlopen(request, timeout=60) as response, \
            open(dst, 'wb') as f:
        size = response.headers.get('Content-Length')
        size = int(size) if size is not None else None
        done = 0
        with tqdm(total=size, disable=not progress, unit='B',
                  unit_scale=True, unit_divisor=1024,
                  desc=osp.basename(dst)) as bar:
            while chunk := response.read(CHUNK):
                f.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                bar.update(len(chunk))
    if size is not None and done != size:
        raise ValueError(f'the download stopped after {done} of {size} '
                         'bytes (truncated)')
    if sha256 is not None and not digest.hexdigest().startswith(
            sha256.lower()):
        raise ValueError(f'its SHA-256 is {digest.hexdigest()}, the index '
                         f'records {sha256} (a wrong or changed file)')


def _read_source(path):
    """Load a downloaded file: safetensors, or a torch checkpoint with
    ``weights_only``.

    Raises:
        ValueError: For a checkpoint that pickles more than tensors.
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
        raise ValueError('it pickles objects other than tensors (training '
                         'arguments), which mmtnt does not unpickle from a '
                         'download') from None


def _convert(entry, checkpoint):
    """Convert a loaded source with the family's converter."""
    from . import converters
    return getattr(converters, FAMILIES[entry['family']][0])(checkpoint)


def fetch_checkpoint(name, progress=True):
    """The converted checkpoint of ``NAME[@SOURCE]``, fetched on first use.

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
        '~/.cache/mmtnt/checkpoints/twins-svt-small_8xb128_in1k@timm.pth'
    """
    entry, source = resolve(name)
    folder = cache_dir()
    cached = osp.join(folder, f'{entry["name"]}@{source["name"]}.pth')
    if osp.isfile(cached):
        return cached
    if urllib.parse.urlsplit(source['url']).netloc in PAGE_HOSTS:
        raise _fail(entry, source, 'the address is a web page, not a file '
                    'that can be downloaded')
    url = download_url(source['url'])
    file_name = osp.basename(urllib.parse.urlsplit(url).path)
    os.makedirs(folder, exist_ok=True)
    work = tempfile.mkdtemp(prefix='.download-', dir=folder)
    try:
        raw = osp.join(work, file_name)
        try:
            _download(url, raw, source['sha256'], progress)
        except urllib.error.HTTPError as error:
            raise _fail(entry, source,
                        f'{url} answered HTTP {error.code} {error.reason}'
                        ) from None
        except (OSError, ValueError) as error:
            reason = getattr(error, 'reason', error)
            raise _fail(entry, source,
                        f'downloading {url} failed: {reason}') from None
        try:
            checkpoint = _convert(entry, _read_source(raw))
        except Exception as error:
            what = str(error).replace(raw, file_name)
            raise _fail(entry, source, 'the downloaded file could not be '
                        f'read or converted: {what}') from None
        partial = osp.join(work, 'converted.pth')
        torch.save(checkpoint, partial)
        os.replace(partial, cached)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return cached


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
