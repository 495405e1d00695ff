"""Models by name: ``list_models``, ``get_model`` and ``inference_model``
over mmtnt's model index, as ``mmpretrain.apis`` are over mmpretrain's.

The names are those of ``configs/*/metafile.yml`` (``mim search mmtnt``);
each names a config, of any of the three tasks. ``pretrained=True`` loads
the model's published weights through ``mmtnt://NAME`` (:mod:`mmtnt.hub`):
downloaded, converted and cached on first use.
"""
import copy
import fnmatch
import warnings
from pathlib import Path

from mmengine.config import Config

from mmtnt import hub

# The Results tasks of the index, by the default_scope that runs them.
SCOPE_TASKS = {
    'mmpretrain': ('Image Classification', ),
    'mmdet': ('Object Detection', 'Instance Segmentation'),
    'mmseg': ('Semantic Segmentation', ),
}


def list_models(pattern=None, task=None):
    """The model names of mmtnt's index.

    Args:
        pattern (str, optional): A wildcard pattern (``fnmatch``) the names
            begin with, as mmpretrain's ``list_models`` takes it.
        task (str, optional): A task of the models' results (``'Image
            Classification'``, ``'Object Detection'``, ``'Instance
            Segmentation'``, ``'Semantic Segmentation'``) or a library
            (``'mmpretrain'``, ``'mmdet'``, ``'mmseg'``) for all of its
            tasks.

    Returns:
        list[str]: The names, sorted.

    Examples:
        >>> from mmtnt.apis import list_models
        >>> list_models('twins-svt-s')
        ['twins-svt-small_8xb128_in1k']
        >>> len(list_models(task='mmseg')) > 0
        True
    """
    names = list(hub.model_index())
    if pattern is not None:
        names = fnmatch.filter(names, pattern + '*')
    if task is not None:
        tasks = SCOPE_TASKS.get(task, (task, ))
        names = [
            name for name in names
            if set(tasks) & set(hub.model_index()[name]['tasks'])
        ]
    return sorted(names)


def _config_and_weights(model, pretrained):
    """The config of a name, path or Config, and the weights to load."""
    if isinstance(model, Config):
        config = copy.deepcopy(model)
    elif Path(str(model)).suffix == '.py':
        config = Config.fromfile(model)
    elif isinstance(model, str):
        entry = hub.model_index().get(model)
        if entry is None:
            raise ValueError(f'No model {model!r} in mmtnt\'s model index; '
                             'list_models() gives the names.')
        config = Config.fromfile(entry['config'])
        if pretrained is True:
            pretrained = hub.SCHEME + model
    else:
        raise TypeError('model must be a name, a config file or a Config, '
                        f'got {type(model).__name__}.')
    if pretrained is True:
        pretrained = config.get('load_from')
        if not pretrained:
            warnings.warn('The config names no weights (load_from): the '
                          'model keeps its initialised weights.')
    return config, pretrained or None


def _dataset_meta(config, checkpoint):
    """The classes (and palette) of a checkpoint, else of the config's test
    dataset class."""
    meta = (checkpoint or {}).get('meta', {})
    if 'dataset_meta' in meta:
        return meta['dataset_meta']
    dataset = config.get('test_dataloader', {}).get('dataset', {})
    if 'type' not in dataset:
        return {}
    from mmengine.registry import DATASETS, DefaultScope
    with DefaultScope.overwrite_default_scope(config.default_scope):
        dataset_class = DATASETS.get(dataset['type'])
    return copy.deepcopy(getattr(dataset_class, 'METAINFO', {}))


def get_model(model, pretrained=False, device=None, **cfg_options):
    """Build a model of the index, or of a config, with its weights.

    Args:
        model (str | Config): A model name (:func:`list_models`), a config
            file or a loaded config.
        pretrained (bool | str): True for the published weights of a named
            model (``mmtnt://NAME``; a config's ``load_from``); a checkpoint
            path or address (``mmtnt://NAME@SOURCE`` included); False for
            the initialised weights. Defaults to False.
        device (str | torch.device, optional): Where to put the model.
            Defaults to None (the CPU).
        **cfg_options: Changes to the config's ``model`` (as mmpretrain's
            ``get_model`` takes them), e.g. ``backbone=dict(out_indices=(0,
            1, 2, 3))``.

    Returns:
        BaseModel: In eval mode, with ``cfg`` (the config),
        ``dataset_meta`` (the classes) and mmpretrain's ``_config``,
        ``_dataset_meta`` and ``_metainfo``.

    Examples:
        >>> import torch
        >>> from mmtnt.apis import get_model
        >>> model = get_model('twins-svt-small_8xb128_in1k', pretrained=True)
        >>> model(torch.rand(1, 3, 224, 224), mode='tensor').shape
        torch.Size([1, 1000])
    """
    config, pretrained = _config_and_weights(model, pretrained)
    if cfg_options:
        config.merge_from_dict({'model': cfg_options})
    config.model.setdefault('data_preprocessor',
                            config.get('data_preprocessor', None))
    from mmengine.registry import MODELS, DefaultScope
    with DefaultScope.overwrite_default_scope(config.default_scope):
        built = MODELS.build(config.model)
    checkpoint = None
    if pretrained:
        from mmengine.runner import load_checkpoint
        checkpoint = load_checkpoint(built, pretrained, map_location='cpu')
    built.dataset_meta = _dataset_meta(config, checkpoint)
    built._dataset_meta = built.dataset_meta
    built.cfg = built._config = config
    built._metainfo = None
    if device is not None:
        built.to(device)
    return built.eval()


def inference_model(model, inputs, **kwargs):
    """Predict on images with the Inferencer of the model's task.

    Args:
        model (BaseModel | str | Config): A model from :func:`get_model`,
            or what :func:`get_model` takes (built with its initialised
            weights unless ``pretrained`` is among ``kwargs``).
        inputs (str | np.ndarray | list): Image files or arrays.
        **kwargs: ``pretrained`` and ``device`` for :func:`get_model`; the
            rest go to the Inferencer's call (``return_datasamples``,
            ``show``...).

    Returns:
        dict | list[dict]: What the Inferencer returns for one input, or
        the list of them for a list.

    Examples:
        >>> from mmtnt.apis import inference_model
        >>> inference_model('twins-svt-small_8xb128_in1k', 'cat.jpg',
        ...                 pretrained=True)['pred_class']  # doctest: +SKIP
        'tabby, tabby cat'
    """
    from mmengine.model import BaseModel
    build_args = {
        k: kwargs.pop(k)
        for k in ('pretrained', 'device') if k in kwargs
    }
    if not isinstance(model, BaseModel):
        model = get_model(model, **build_args)
    from .inference import build_inferencer
    device = next(model.parameters()).device
    with warnings.catch_warnings():
        # the Inferencer builds a model with no weights, replaced below
        warnings.simplefilter('ignore')
        inferencer = build_inferencer(
            model.cfg, device=str(device), cpu_accel=False)
    inferencer.model = model
    if getattr(inferencer, 'visualizer', None) is not None:
        inferencer.visualizer.dataset_meta = model.dataset_meta
    if hasattr(inferencer, 'classes'):
        inferencer.classes = model.dataset_meta.get('classes')
    results = inferencer(inputs, **kwargs)
    if isinstance(results, dict):  # mmdet's and mmseg's
        results = results['predictions']
    if not isinstance(results, list):  # mmseg's for one input
        results = [results]
    return results if isinstance(inputs, list) else results[0]
