"""The model index (``model-index.yml`` and the metafiles), read once per
process."""
import functools
import os.path as osp

import yaml

SCHEME = 'mmtnt://'
# The converter and its command line of each collection.
FAMILIES = {
    'TNT': ('convert_tnt', 'tnt2mmtnt.py'),
    'PyramidTNT': ('convert_pyramid_tnt', 'pyramid_tnt2mmtnt.py'),
    'Twins': ('convert_twins', 'twins2mmtnt.py'),
}
# The tasks of a model without published results, by its training data.
DATA_TASKS = {
    'ImageNet-1k': ['Image Classification'],
    'COCO': ['Object Detection'],
    'ADE20K': ['Semantic Segmentation'],
}


class HubError(RuntimeError):
    """Published weights that could not be found, fetched, checked or
    converted; the message says what to do by hand."""


def index_file():
    """``mmtnt/.mim/model-index.yml``, else that of the source tree."""
    package = osp.dirname(osp.dirname(osp.abspath(__file__)))
    for root in (osp.join(package, '.mim'), osp.dirname(package)):
        path = osp.join(root, 'model-index.yml')
        if osp.isfile(path):
            return path
    raise HubError(f'mmtnt has no model index next to {package}.')


@functools.lru_cache(maxsize=None)
def model_index():
    """Every model of the index, by name.

    Returns:
        dict[str, dict]: ``name``, ``config`` (absolute), ``family``,
        ``tasks`` and ``sources`` (``name``, ``url``, ``sha256``; the
        default first) of each model.

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


def _tasks(model):
    """The tasks of a model's results, else of its training data."""
    tasks = [result['Task'] for result in model.get('Results', [])]
    if tasks:
        return list(dict.fromkeys(tasks))
    tasks = list(DATA_TASKS[model['Metadata']['Training Data']])
    if 'Mask R-CNN' in model['Metadata'].get('Architecture', []):
        tasks.append('Instance Segmentation')
    return tasks


def find_model(name):
    """The :func:`model_index` entry of a model name in any case, or None.

    Examples:
        >>> from mmtnt.hub import find_model
        >>> find_model('Twins-SVT-Small_8xb128_in1k')['family']
        'Twins'
    """
    for key, entry in model_index().items():
        if key.lower() == name.lower():
            return entry
    return None


def resolve(name):
    """Find a model and one of its sources by ``NAME[@SOURCE]``.

    Args:
        name (str): ``[mmtnt://]NAME[@SOURCE]``, the name in any case.

    Returns:
        tuple[dict, dict]: The entry and the source (default: the first).

    Examples:
        >>> from mmtnt.hub import resolve
        >>> entry, source = resolve(
        ...     'mmtnt://twins-svt-small_8xb128_in1k@mmpretrain')
        >>> source['sha256']
        '8fe5205b'
    """
    name = name[len(SCHEME):] if name.startswith(SCHEME) else name
    model_name, _, source_name = name.partition('@')
    entry = find_model(model_name)
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
