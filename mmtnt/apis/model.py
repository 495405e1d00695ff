"""Models by the names of mmtnt's model index (``list_models``,
``get_model``, ``inference_model``, as ``mmpretrain.apis`` over
mmpretrain's), and the one builder they and :mod:`mmtnt.deploy` share
(``model_config``, ``init_model``)."""
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
        pattern (str, optional): A wildcard pattern (``fnmatch``, in any
            case) of the beginning of the names to list.
        exclude_patterns (list[str] | str, optional): Patterns of names
            to leave out.
        task (str, optional): A task of the models' results (``'Image
            Classification'``, ``'Semantic Segmentation'``...) or a
            library (``'mmpretrain'``, ``'mmdet'``, ``'mmseg'``).

    Returns:
        list[str]: The names, sorted.

    Examples:
        >>> from mmtnt.apis import list_models
        >>> list_models('Twins-SVT-S')
        ['twins-svt-small_8xb128_in1k']
        >>> list_models('upernet_twins-svt-s',
        ...             exclude_patterns=['*mmseg', '*layer-decay'])
        ['upernet_twins-svt-s_8xb2-160k_ade20k-512x512']
        >>> len(list_models(task='mmseg')) > 0
        True
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
        model (str | Config): A model name (:func:`list_models`, in any
            case), a config file (``.py``) or a loaded config (copied).
        pretrained (bool | str): True for a named model's published weights
            (``mmtnt://NAME``), else the config's ``load_from``, with a
            warning where there is neither; a checkpoint (file, URL or
            ``mmtnt://NAME[@SOURCE]``); False for none. Defaults to False.
            :func:`get_model`, :func:`inference_model` and
            :class:`FeatureExtractor` take it as this function does.

    Returns:
        tuple[Config, str | None]: The config and the checkpoint to load
        (None: keep the initialised weights).

    Raises:
        ValueError: For a name that is not in the model index.
        TypeError: For anything else than a name, a file or a Config.

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

    Built under the config's ``default_scope``, none left behind; a
    top-level ``data_preprocessor`` is the model's, as in mmengine's Runner.

    Args:
        config (Config): A config whose ``default_scope`` is
            ``'mmpretrain'``, ``'mmseg'`` or ``'mmdet'``.
        checkpoint (str, optional): A file, a URL or
            ``mmtnt://NAME[@SOURCE]``, checked or fetched
            (:func:`mmtnt.hub.prepare_checkpoint`) before the model is
            built. None keeps the initialised weights.
        init_weights (bool): Without a checkpoint, initialise the weights
            as the model's ``init_cfg`` says, as training starts, instead
            of keeping the layers' own initialisation. Defaults to False.

    Returns:
        BaseModel: On the CPU, in eval mode, with ``cfg`` (the config),
        ``dataset_meta`` (the checkpoint's classes, else those of the
        config's test dataset class) and mmpretrain's ``_config``,
        ``_dataset_meta`` and ``_metainfo``.

    Raises:
        ValueError: For another ``default_scope``.
        CheckpointFileError: For a checkpoint file that cannot be one.
        HubError: If published weights cannot be fetched.

    Examples:
        >>> from mmengine.config import Config
        >>> from mmengine.registry import DefaultScope
        >>> from mmtnt.apis import init_model
        >>> model = init_model(Config.fromfile(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py'))
        >>> type(model).__name__, DefaultScope.get_current_instance()
        ('ImageClassifier', None)
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
    """``model.init_weights()`` without mmengine's log of every initialised
    parameter."""
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
    """Build a model of the index, or of a config, with its weights
    (:func:`model_config`, then :func:`init_model`).

    Args:
        model (str | Config): As :func:`model_config` takes it.
        pretrained (bool | str): As :func:`model_config` takes it.
            Defaults to False.
        device (str | torch.device, optional): Where to put the model.
            Defaults to None (the CPU).
        **cfg_options: Changes to the config's ``model``, e.g.
            ``backbone=dict(out_indices=(0, 1, 2, 3))``.

    Returns:
        BaseModel: As :func:`init_model` returns it.

    Examples:
        >>> import torch
        >>> from mmtnt.apis import get_model
        >>> model = get_model('twins-svt-small_8xb128_in1k', pretrained=True)
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
        model (BaseModel | str | Config): A built model (from
            :func:`get_model`), used as it is, or what :func:`get_model`
            takes.
        inputs (str | np.ndarray | list): Image files or arrays.
        pretrained (bool | str): As :func:`model_config` takes it, for a
            model not built. Defaults to True.
        device (str, optional): Where to run. Defaults to the built model's
            device, else the CPU.
        cpu_accel (bool): As :func:`build_inferencer` takes it. Defaults to
            True.
        **kwargs: The Inferencer's call arguments (``return_datasamples``,
            ``show``...).

    Returns:
        dict | list[dict]: What the Inferencer returns for one input, or
        the list of them for a list.

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
