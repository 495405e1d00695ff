"""Models by the names of mmtnt's model index, as ``mmpretrain.apis``, and
the one builder they and :mod:`mmtnt.deploy` share."""
import copy
import fnmatch
import logging
import warnings
from pathlib import Path

from mmengine.config import Config

from mmtnt.hub import SCHEME, find_model, index, prepare_checkpoint

# The Results tasks of the index, by the default_scope that runs them.
SCOPE_TASKS = {
    'mmpretrain': ('Image Classification', ),
    'mmdet': ('Object Detection', 'Instance Segmentation'),
    'mmseg': ('Semantic Segmentation', ),
}


def list_models(pattern=None, exclude_patterns=None, task=None):
    """The model names of mmtnt's index, as mmpretrain's ``list_models``.

    Args:
        pattern (str, optional): A wildcard pattern (any case) of the
            beginning of the names.
        exclude_patterns (list[str] | str, optional): Patterns to leave out.
        task (str, optional): A task (``'Image Classification'``...) or a
            library (``'mmpretrain'``, ``'mmdet'``, ``'mmseg'``).

    Returns:
        list[str]: The names, sorted.

    Examples:
        >>> from mmtnt.apis import list_models
        >>> list_models('Twins-SVT-S')
        ['twins-svt-small_8xb128_in1k']
    """
    if isinstance(exclude_patterns, str):
        exclude_patterns = [exclude_patterns]
    tasks = set(SCOPE_TASKS.get(task, (task, )))

    def listed(name, entry):
        return ((pattern is None or _begins(name, pattern))
                and not any(_begins(name, p) for p in exclude_patterns or [])
                and (task is None or bool(tasks & set(entry['tasks']))))

    return sorted(name for name, entry in index.model_index().items()
                  if listed(name, entry))


def _begins(name, pattern):
    """Whether ``pattern`` matches the beginning of ``name``, in any case."""
    return fnmatch.fnmatchcase(name.lower(), pattern.lower() + '*')


def model_config(model, pretrained=False):
    """The config of a model name, config file or Config, and the weights
    that ``pretrained`` asks for.

    Args:
        model (str | Config): A model name (any case), a ``.py`` config
            file or a loaded config (copied).
        pretrained (bool | str): True for the published weights, else the
            config's ``load_from`` (a warning if neither); a checkpoint
            (file, URL or ``mmtnt://NAME[@SOURCE]``); False for none.

    Returns:
        tuple[Config, str | None]: The config and the checkpoint (None:
        keep the initialised weights).

    Examples:
        >>> from mmtnt.apis import model_config
        >>> config, checkpoint = model_config('twins-svt-small_8xb128_in1k',
        ...                                   pretrained=True)
        >>> config.default_scope, checkpoint
        ('mmpretrain', 'mmtnt://twins-svt-small_8xb128_in1k')
    """
    published = None
    if isinstance(model, Config):
        config = copy.deepcopy(model)
    elif Path(str(model)).suffix == '.py':
        config = Config.fromfile(model)
    elif isinstance(model, str):
        entry = find_model(model)
        if entry is None:
            raise ValueError(f'No model {model!r} in mmtnt\'s model index; '
                             'list_models() gives the names.')
        config = Config.fromfile(entry['config'])
        published = SCHEME + entry['name'] if entry['sources'] else None
    else:
        raise TypeError('model must be a name, a config file or a Config, '
                        f'got {type(model).__name__}.')
    if pretrained is True:
        pretrained = published or config.get('load_from')
        if not pretrained:
            warnings.warn('No published weights and no load_from for this '
                          'model: it keeps its initialised (random) weights.')
    return config, pretrained or None


def init_model(config, checkpoint=None, init_weights=False):
    """Build the model of a config with its weights: the one builder
    behind :func:`get_model` and :func:`mmtnt.deploy.build_model`.

    Built under the config's ``default_scope``; a top-level
    ``data_preprocessor`` is the model's, as in mmengine's Runner.

    Args:
        config (Config): A config whose ``default_scope`` is
            ``'mmpretrain'``, ``'mmseg'`` or ``'mmdet'``.
        checkpoint (str, optional): A file, a URL or
            ``mmtnt://NAME[@SOURCE]``; None keeps the initialised weights.
        init_weights (bool): Without a checkpoint, initialise as the
            ``init_cfg`` says. Defaults to False.

    Returns:
        BaseModel: On the CPU, in eval mode, with ``cfg`` and
        ``dataset_meta`` (the checkpoint's, else the test dataset's).

    Examples:
        >>> from mmengine.config import Config
        >>> from mmtnt.apis import init_model
        >>> model = init_model(Config.fromfile(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py'))
        >>> type(model).__name__
        'ImageClassifier'
    """
    scope = config.get('default_scope')
    if scope not in SCOPE_TASKS:
        raise ValueError(
            "The config's default_scope must be 'mmpretrain' (classifiers), "
            f"'mmseg' (segmentors) or 'mmdet' (detectors), got {scope!r}.")
    prepare_checkpoint(checkpoint)
    model_cfg = config.model.copy()
    if config.get('data_preprocessor') is not None:
        model_cfg.setdefault('data_preprocessor', config.data_preprocessor)
    from mmengine.registry import MODELS, DefaultScope
    with DefaultScope.overwrite_default_scope(scope):
        model = MODELS.build(model_cfg)
        if checkpoint is None and init_weights:
            _quietly_init_weights(model)
    loaded = None
    if checkpoint is not None:
        from mmengine.runner import load_checkpoint
        loaded = load_checkpoint(model, checkpoint, map_location='cpu')
    model.dataset_meta = _dataset_meta(config, loaded)
    model._dataset_meta = model.dataset_meta
    model.cfg = model._config = config
    model._metainfo = None
    return model.eval()


def _quietly_init_weights(model):
    """``model.init_weights()`` without mmengine's per-parameter log."""
    from mmengine.logging import MMLogger
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        model.init_weights()
    finally:
        logger.setLevel(level)


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
        model (str | Config): As :func:`model_config` takes it.
        pretrained (bool | str): As :func:`model_config`. Defaults to False.
        device (str | torch.device, optional): Defaults to the CPU.
        **cfg_options: Changes to the config's ``model``, e.g.
            ``backbone=dict(out_indices=(0, 1, 2, 3))``.

    Examples:
        >>> import torch
        >>> from mmtnt.apis import get_model
        >>> model = get_model('twins-svt-small_8xb128_in1k', train_cfg=None)
        >>> model(torch.rand(1, 3, 224, 224), mode='tensor').shape
        torch.Size([1, 1000])
    """
    config, checkpoint = model_config(model, pretrained)
    if cfg_options:
        config.merge_from_dict({'model': cfg_options})
    built = init_model(config, checkpoint)
    if device is not None:
        built.to(device)
    return built


def inference_model(model,
                    inputs,
                    pretrained=True,
                    device=None,
                    cpu_accel=True,
                    **kwargs):
    """Predict on images with the Inferencer of the model's task, as
    mmpretrain's ``inference_model`` does.

    Args:
        model (BaseModel | str | Config): A built model, used as it is, or
            what :func:`get_model` takes.
        inputs (str | np.ndarray | list): Image files or arrays.
        pretrained (bool | str): As :func:`model_config`. Defaults to True.
        device (str, optional): Defaults to the built model's, else the CPU.
        cpu_accel (bool): As :func:`build_inferencer`. Defaults to True.
        **kwargs: The Inferencer's call arguments.

    Returns:
        dict | list[dict]: The Inferencer's result, or a list for a list.

    Examples:
        >>> from mmtnt.apis import inference_model
        >>> inference_model('twins-svt-small_8xb128_in1k',
        ...                 'cat.jpg')['pred_class']  # doctest: +SKIP
        'tabby, tabby cat'
    """
    from mmengine.model import BaseModel

    from .inference import build_inferencer
    if not isinstance(model, BaseModel):
        model = get_model(model, pretrained, device)
    inferencer = build_inferencer(model, device=device, cpu_accel=cpu_accel)
    results = inferencer(inputs, **kwargs)
    if isinstance(results, dict):  # mmdet's and mmseg's
        results = results['predictions']
    if not isinstance(results, list):  # mmseg's for one input
        results = [results]
    return results if isinstance(inputs, list) else results[0]
