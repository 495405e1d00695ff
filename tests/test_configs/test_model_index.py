"""OpenMMLab's model index: ``model-index.yml`` and ``configs/*/metafile.yml``.

* ``model-index.yml`` imports every metafile under configs/, and only those;
* every config of the indexed folders (:data:`INDEXED_FOLDERS`, subfolders
  included) is a model of its folder's metafile, and every model names an
  existing config, is named after it and belongs to a collection of its
  metafile, whose paper, README and code are given (the last two exist);
* model names (and configs) are unique over all metafiles;
* ``Parameters`` is exactly the parameter count of the model the config
  builds (built on the meta device: no memory, no initialisation), and the
  training data, batch size, GPUs, epochs or iterations agree with it;
* every result metric is a number, under a task and data set of the
  config's library; converted weights name their source by URL;
* mim's own reader (``modelindex``, and the table ``mim search`` prints)
  reads the index in-process, whatever is installed.

A config added to an indexed folder fails :func:`test_every_config_is_indexed`
until its metafile has an entry; the failure prints one to start from.
"""
import functools
import glob
import json
import numbers
import os
import os.path as osp
import re
from collections import Counter

import pytest
import torch
import yaml
from mmengine.config import Config, ConfigDict
from mmengine.registry import MODELS, DefaultScope

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG_ROOT = osp.join(ROOT, 'configs')
MODEL_INDEX = osp.join(ROOT, 'model-index.yml')
# The folders of configs/ whose every config is in the model index, each
# through its own metafile.yml. Add a folder here once it has one.
INDEXED_FOLDERS = ('tnt', 'pyramid_tnt', 'twins')
# The training set of a config, by its dataset type, as the metafiles and
# OpenMMLab's index name it.
DATASET_NAMES = {
    'ImageNet': 'ImageNet-1k',
    'CocoDataset': 'COCO',
    'ADE20KDataset': 'ADE20K',
}
# The result tasks of each library.
TASKS = {
    'mmpretrain': {'Image Classification'},
    'mmdet': {'Object Detection', 'Instance Segmentation'},
    'mmseg': {'Semantic Segmentation'},
}


def read_yaml(path):
    with open(path, encoding='utf-8') as f:
        return yaml.safe_load(f)


def metafile_of(folder):
    return f'configs/{folder}/metafile.yml'


@functools.lru_cache(maxsize=None)
def read_metafile(rel_path):
    """The metafile at ``rel_path`` (relative to the repository)."""
    return read_yaml(osp.join(ROOT, rel_path))


def all_metafiles():
    """Every metafile under configs/, relative to the repository."""
    paths = glob.glob(
        osp.join(CONFIG_ROOT, '**', 'metafile.yml'), recursive=True)
    return sorted(osp.relpath(p, ROOT).replace(os.sep, '/') for p in paths)


def folder_configs(folder):
    """The configs under configs/<folder>, relative to the repository."""
    paths = glob.glob(
        osp.join(CONFIG_ROOT, folder, '**', '*.py'), recursive=True)
    rel = (osp.relpath(p, ROOT).replace(os.sep, '/') for p in paths)
    return sorted(p for p in rel if '_base_' not in p.split('/'))


def indexed_models():
    """(metafile, model entry) of every model of the indexed folders."""
    return [(metafile_of(folder), model) for folder in INDEXED_FOLDERS
            for model in read_metafile(metafile_of(folder))['Models']]


MODELS_TO_CHECK = indexed_models()


def config_name(path):
    return osp.splitext(osp.basename(path))[0]


@functools.lru_cache(maxsize=None)
def load_config(rel_path):
    # no yapf pass over the merged text: much faster
    return Config.fromfile(
        osp.join(ROOT, rel_path), format_python_code=False)


@functools.lru_cache(maxsize=None)
def _count_parameters(scope, model_json):
    model_cfg = ConfigDict(json.loads(model_json))
    with DefaultScope.overwrite_default_scope(scope), torch.device('meta'):
        model = MODELS.build(model_cfg)
    return sum(p.numel() for p in model.parameters())


def count_parameters(cfg):
    """Parameters of the model ``cfg`` builds, counted on the meta device
    (configs that build the same model are built once)."""
    model_json = json.dumps(cfg.model.to_dict(), sort_keys=True)
    return _count_parameters(cfg.get('default_scope'), model_json)


def training_data(cfg):
    """The metafile name of the config's training set, or None."""
    dataset = cfg.get('train_dataloader', {}).get('dataset', {})
    while 'dataset' in dataset:  # wrappers (RepeatDataset, ...)
        dataset = dataset['dataset']
    return DATASET_NAMES.get(dataset.get('type'))


def entry_template(rel_path, collection):
    """A metafile entry for a config, with what can be read from it."""
    cfg = load_config(rel_path)
    lines = [
        f'  - Name: {config_name(rel_path)}',
        f'    In Collection: {collection}',
        f'    Config: {rel_path}',
        '    Metadata:',
        f'      Training Data: {training_data(cfg)}',
        f'      Parameters: {count_parameters(cfg)}',
        '    # Results: (the published metrics, if any)',
        '    # Converted From: (Weights, Code: where a public checkpoint '
        'exists)',
    ]
    return '\n'.join(lines)


def test_model_index_imports_every_metafile():
    imports = read_yaml(MODEL_INDEX)['Import']
    assert sorted(imports) == all_metafiles(), (
        'model-index.yml must import every configs/**/metafile.yml and '
        'nothing else')
    for folder in INDEXED_FOLDERS:
        assert metafile_of(folder) in imports


@pytest.mark.parametrize('folder', INDEXED_FOLDERS)
def test_every_config_is_indexed(folder):
    metafile = read_metafile(metafile_of(folder))
    indexed = {model['Config'] for model in metafile['Models']}
    missing = [p for p in folder_configs(folder) if p not in indexed]
    if missing:
        collection = metafile['Collections'][0]['Name']
        templates = '\n'.join(entry_template(p, collection) for p in missing)
        pytest.fail(f'Not in {metafile_of(folder)}: {missing}. Add to its '
                    f'Models (Parameters counted from the config):\n'
                    f'{templates}')


@pytest.mark.parametrize('folder', INDEXED_FOLDERS)
def test_models_name_their_configs(folder):
    metafile = read_metafile(metafile_of(folder))
    collections = {c['Name'] for c in metafile['Collections']}
    problems = []
    for model in metafile['Models']:
        config = model['Config']
        if not osp.isfile(osp.join(ROOT, config)):
            problems.append(f'{model["Name"]}: no config {config}')
        if not config.startswith(f'configs/{folder}/'):
            problems.append(f'{model["Name"]}: {config} is not in {folder}')
        if model['Name'] != config_name(config):
            problems.append(f'{model["Name"]} is not named after {config}')
        if model.get('In Collection') not in collections:
            problems.append(f'{model["Name"]}: unknown collection '
                            f'{model.get("In Collection")!r}')
    assert not problems, '\n'.join(problems)


def test_names_are_unique():
    models = [m for path in all_metafiles()
              for m in read_metafile(path).get('Models', [])]
    for key in ('Name', 'Config'):
        counts = Counter(m[key] for m in models)
        duplicates = sorted(k for k, n in counts.items() if n > 1)
        assert not duplicates, f'{key}s used twice: {duplicates}'
    collections = Counter(c['Name'] for path in all_metafiles()
                          for c in read_metafile(path).get('Collections', []))
    assert all(n == 1 for n in collections.values()), collections


@pytest.mark.parametrize('folder', INDEXED_FOLDERS)
def test_collections(folder):
    for collection in read_metafile(metafile_of(folder))['Collections']:
        paper = collection['Paper']
        assert paper['URL'].startswith('https://') and paper['Title']
        assert osp.isfile(osp.join(ROOT, collection['README']))
        code = collection['Code']['URL']
        assert code.startswith('https://') or osp.isfile(
            osp.join(ROOT, code)), f'{collection["Name"]}: code {code}'
        assert collection['Metadata']['Training Data']


@pytest.mark.parametrize('metafile,model', MODELS_TO_CHECK,
                         ids=[m['Name'] for _, m in MODELS_TO_CHECK])
def test_model_entry_agrees_with_config(metafile, model):
    cfg = load_config(model['Config'])
    meta = model['Metadata']
    params = meta['Parameters']
    assert isinstance(params, int) and not isinstance(params, bool)
    assert params == count_parameters(cfg), (
        f'{model["Name"]}: Parameters {params}, but the config builds '
        f'{count_parameters(cfg)}')
    if 'FLOPs' in meta:
        assert isinstance(meta['FLOPs'], int) and meta['FLOPs'] > 0

    data = training_data(cfg)
    if data is not None:
        assert meta['Training Data'] == data
    batch = cfg.train_dataloader.batch_size
    if 'Training Resources' in meta:
        gpus = re.fullmatch(r'(\d+)x GPUs', meta['Training Resources'])
        assert gpus, meta['Training Resources']
        if 'Batch Size' in meta:
            assert meta['Batch Size'] == int(gpus.group(1)) * batch
    if 'Batch Size' in meta and cfg.get('auto_scale_lr'):
        assert meta['Batch Size'] == cfg.auto_scale_lr.base_batch_size
    if 'Epochs' in meta:
        assert meta['Epochs'] == cfg.train_cfg.max_epochs
    if 'Iterations' in meta:
        assert meta['Iterations'] == cfg.train_cfg.max_iters

    tasks = TASKS.get(cfg.get('default_scope'))
    for result in model.get('Results', []):
        if tasks is not None:
            assert result['Task'] in tasks, result
        assert result['Dataset'] == meta['Training Data'], result
        assert result['Metrics'], result
        for name, value in result['Metrics'].items():
            assert isinstance(value, numbers.Real) and not isinstance(
                value, bool), f'{model["Name"]}: {name}: {value!r}'
    converted = model.get('Converted From')
    if converted is not None:
        assert converted['Weights'].startswith('https://')
        assert converted['Code'].startswith('https://')


def test_mim_reads_the_index():
    """What ``mim search mmtnt`` prints, from the repository's index."""
    search = pytest.importorskip('mim.commands.search')
    from modelindex.load_model_index import load

    index = load(MODEL_INDEX)
    # modelindex takes README paths as relative to the metafile; OpenMMLab's
    # metafiles (and these) give them from the repository's root, where
    # test_collections finds them.
    errors = [
        e for e in index.check(silent=True)
        if 'Path to README file' not in e
    ]
    assert errors == []
    table = search.convert2df(index)
    names = [model['Name'] for _, model in MODELS_TO_CHECK]
    assert set(names) <= set(table.index)
    # as `mim search mmtnt --config NAME` looks them up
    found = search.filter_by_configs(table, names)
    assert sorted(found.index) == sorted(names)
    for _, model in MODELS_TO_CHECK:
        row = found.loc[model['Name']]
        assert row['parameters'] == model['Metadata']['Parameters']
        assert row['config'] == model['Config']
