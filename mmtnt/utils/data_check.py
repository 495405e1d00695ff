"""Fail fast, with a useful message, when a config's dataset is missing."""
import os.path as osp

DATASETS_DOC = 'docs/datasets.md'


def _is_local(path):
    """Whether ``path`` is a non-empty local path (not a URL or remote)."""
    return isinstance(path, str) and bool(path) and '://' not in path


def _dataset_paths(dataset_cfg, where):
    """Yield ``(path, config key)`` for every local path a dataset config
    reads, joined as mmengine's ``BaseDataset`` does (``where``: its key)."""
    if 'dataset' in dataset_cfg:
        yield from _dataset_paths(dataset_cfg['dataset'], f'{where}.dataset')
    for i, child in enumerate(dataset_cfg.get('datasets', [])):
        yield from _dataset_paths(child, f'{where}.datasets[{i}]')
    if dataset_cfg.get('download', False):
        return
    data_root = dataset_cfg.get('data_root') or ''
    if _is_local(data_root):
        yield data_root, f'{where}.data_root'
    prefix = dataset_cfg.get('data_prefix') or {}
    if isinstance(prefix, str):
        prefix = {'': prefix}
    named = {'ann_file': dataset_cfg.get('ann_file')}
    for key, path in prefix.items():
        named['.'.join(filter(None, ('data_prefix', key)))] = path
    for key, path in named.items():
        if not _is_local(path):
            continue
        path = osp.join(data_root, path)
        if _is_local(path):
            yield path, f'{where}.{key}'


def check_data_paths(cfg, dataloaders):
    """Raise if a path read by the datasets of ``dataloaders`` is missing.

    Args:
        cfg (Config): The full config.
        dataloaders (Sequence[str]): Dataloader keys, e.g.
            ``('test_dataloader', )``; absent or None ones are skipped.

    Raises:
        FileNotFoundError: Naming the path, its config key and
            ``docs/datasets.md``.
    """
    for name in dataloaders:
        loader_cfg = cfg.get(name)
        if not loader_cfg or 'dataset' not in loader_cfg:
            continue
        for path, where in _dataset_paths(loader_cfg['dataset'],
                                          f'{name}.dataset'):
            if not osp.exists(path):
                raise FileNotFoundError(
                    f'Dataset path "{path}" (from {where}) does not exist. '
                    f'See {DATASETS_DOC} for how to get the dataset and '
                    f'where to put it, or point {where} at your copy.')
