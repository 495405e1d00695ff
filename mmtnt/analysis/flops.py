"""Count the parameters and FLOPs (MACs) of the model of any config with
mmengine's ``FlopAnalyzer`` (one multiply-add as one FLOP), plus a rule for
``aten::scaled_dot_product_attention``."""
import math
import os.path as osp

import torch
import torch.nn as nn
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape
from mmengine.config import Config
from mmengine.hub import get_config
from mmengine.model import revert_sync_batchnorm

from mmtnt.hub import model_index
from mmtnt.utils.cli import load_config as load_config_file

TASK_NAMES = dict(
    mmpretrain='classification', mmdet='detection', mmseg='segmentation')
# Default inputs (H, W) of the dense tasks, and where they come from.
DEFAULT_SHAPES = dict(
    mmdet=((800, 1280), 'the 1280x800 of mmdet\'s FLOPs figures'),
    mmseg=((512, 512), 'the ADE20K crop'))
ATTENTION_OP = 'scaled_dot_product_attention'
# The row of what the trace puts on the model itself (e.g. methods called
# without __call__, as mmseg's ``decode_head.forward``).
REST = '(model itself)'
ARCH_LETTERS = dict(tiny='ti', small='s', medium='m', base='b', large='l')


def sdpa_flop_jit(inputs, outputs):
    """MACs of ``aten::scaled_dot_product_attention``: ``q @ k^T`` and
    ``attn @ v`` (softmax and mask are element-wise, not counted)."""
    query, key, value = (get_shape(v) for v in inputs[:3])
    out = get_shape(outputs[0])
    # The output's leading dims are the broadcast batch and head dims.
    rows = math.prod(out[:-1])
    return rows * key[-2] * (query[-1] + value[-1])


def flop_analyzer(model, inputs):
    """mmengine's FlopAnalyzer with the attention handle, quiet."""
    analyzer = FlopAnalyzer(model, inputs)
    analyzer.set_op_handle(
        'aten::scaled_dot_product_attention', sdpa_flop_jit)
    return analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(
        False)


def forward_macs(model, images):
    """Multiply-adds of one eval-mode forward of ``model`` on ``images``.

    Examples:
        >>> forward_macs(nn.Linear(8, 4), torch.rand(1, 8))
        32
    """
    analyzer = flop_analyzer(model.eval(), (images, ))
    with torch.no_grad():
        return analyzer.total()


class TensorForward(nn.Module):
    """A model called in ``'tensor'`` mode with fixed ``data_samples``, so
    that it takes one tensor as a traced module must."""

    def __init__(self, model, data_samples=None):
        super().__init__()
        self.model = model
        self.data_samples = data_samples

    def forward(self, inputs):
        return self.model(inputs, self.data_samples, mode='tensor')


def load_config(name, cfg_options=None, scopes=tuple(TASK_NAMES)):
    """Read a config whose ``default_scope`` is one of ``scopes``.

    Args:
        name (str): A config file, or ``package::path`` of an installed
            OpenMMLab package's config (mmengine's ``get_config``).
        cfg_options (dict, optional): Settings merged into it.
        scopes (Sequence[str]): The ``default_scope`` values accepted.

    Raises:
        SystemExit: A missing config, or another ``default_scope``.

    Examples:
        >>> load_config('configs/tnt/tnt-s-p16_16xb64_in1k.py').default_scope
        'mmpretrain'
    """
    if '::' in name:
        try:
            cfg = get_config(name)
        except (FileNotFoundError, ValueError) as error:
            raise SystemExit(f'config not found: {name} ({error})')
        if cfg_options:
            cfg.merge_from_dict(cfg_options)
    elif osp.isfile(name):
        cfg = load_config_file(name, cfg_options)
    else:
        raise SystemExit(f'config file not found: {name}')
    scope = cfg.get('default_scope')
    if scope not in scopes:
        raise SystemExit(f'{name}: its default_scope {scope!r} is none of '
                         f'{sorted(scopes)}.')
    return cfg


def imagenet_variants():
    """The ImageNet-1k classifiers of the model index, the first config of
    each backbone architecture.

    Returns:
        dict: Short name (``'tnt-s'``) -> ``label``, ``config``,
        ``backbone`` (``type``, ``arch``[, ``img_size``]) and ``side``.

    Examples:
        >>> variants = imagenet_variants()
        >>> variants['pyramidtnt-ti']['label'], variants['pyramidtnt-ti'][
        ...     'side']
        ('PyramidTNT-Ti', 192)
    """
    variants = {}
    for entry in model_index().values():
        if entry['tasks'] != ['Image Classification']:
            continue
        cfg = Config.fromfile(entry['config'])
        kind = cfg.model.backbone.type.split('.')[-1]
        arch = ARCH_LETTERS.get(cfg.model.backbone.arch,
                                cfg.model.backbone.arch)
        backbone = dict(type=cfg.model.backbone.type, arch=arch)
        if 'img_size' in cfg.model.backbone:
            backbone['img_size'] = cfg.model.backbone.img_size
        variants.setdefault(
            f'{kind.lower()}-{arch}',
            dict(
                label=f'{kind}-{arch.capitalize()}',
                config=entry['config'],
                backbone=backbone,
                side=default_shape(cfg)[0][0]))
    return variants


def build_eval_model(cfg):
    """The config's model on the CPU in eval mode, SyncBN replaced by
    BatchNorm, mmseg's auxiliary head dropped."""
    from mmtnt.apis import init_model
    model = revert_sync_batchnorm(init_model(cfg))
    if getattr(model, 'auxiliary_head', None) is not None:
        model.auxiliary_head = None
    model.eval()  # some train() overrides do not return the module
    return model


def default_shape(cfg):
    """The test input (H, W) of a config, and where it comes from.

    Args:
        cfg (Config): The full config.

    Returns:
        tuple[tuple[int, int], str]: The shape and its source: a
        classifier's last square test crop, else the backbone's
        ``img_size``, else 224; :data:`DEFAULT_SHAPES` for dense tasks.

    Examples:
        >>> default_shape(load_config(
        ...     'configs/pyramid_tnt/pyramid-tnt-ti_8xb128_in1k-192px.py'))
        ((192, 192), "the test pipeline's crop")
    """
    if cfg.default_scope in DEFAULT_SHAPES:
        return DEFAULT_SHAPES[cfg.default_scope]
    for loader in ('test_dataloader', 'val_dataloader'):
        dataset = cfg.get(loader, {}).get('dataset', {})
        while 'dataset' in dataset:
            dataset = dataset['dataset']
        for transform in reversed(dataset.get('pipeline', [])):
            size = transform.get('crop_size', transform.get('scale'))
            if isinstance(size, (tuple, list)) and len(set(size)) == 1:
                size = size[0]
            if isinstance(size, int):
                return (size, size), 'the test pipeline\'s crop'
    side = cfg.model.get('backbone', {}).get('img_size')
    if isinstance(side, int):
        return (side, side), 'the backbone\'s img_size'
    return (224, 224), 'the ImageNet default'


def size_divisor(cfg):
    """The divisor the data preprocessor pads test images to (1 if none)."""
    pre = cfg.model.get('data_preprocessor') or cfg.get(
        'data_preprocessor') or {}
    for value in (pre.get('pad_size_divisor'), pre.get('size_divisor'),
                  (pre.get('test_cfg') or {}).get('size_divisor')):
        if value:
            return int(value)
    return 1


def data_samples(scope, shape, padded):
    """Data samples of one padded image for a dense ``'tensor'`` forward;
    None for a classifier."""
    if scope not in ('mmdet', 'mmseg'):
        return None
    metainfo = dict(img_shape=shape, ori_shape=shape, pad_shape=padded)
    if scope == 'mmdet':
        from mmdet.structures import DetDataSample as sample_class
        metainfo.update(batch_input_shape=padded, scale_factor=(1., 1.))
    else:
        from mmseg.structures import SegDataSample as sample_class
    return [sample_class(metainfo=metainfo)]


def model_parts(model, analyzer, params):
    """(name, params, MACs) of each child of ``model`` that has any, then
    :data:`REST` if anything is left."""
    by_module = analyzer.by_module()
    parts = []
    for name, _ in model.named_children():
        macs = by_module.get(f'model.{name}', 0)
        if params.get(name, 0) or macs:
            parts.append((name, params.get(name, 0), macs))
    rest = (params[''] - sum(p for _, p, _ in parts),
            analyzer.total() - sum(m for _, _, m in parts))
    if any(rest):
        parts.append((REST, *rest))
    return parts


def analyze(cfg, shape=None):
    """Count the params and MACs of a config's model.

    Args:
        cfg (Config): The full config.
        shape (tuple[int, int], optional): Input (H, W); the config's
            default if None.

    Returns:
        dict: ``params``, ``macs``, ``attention_macs``, ``skipped``,
        ``parts``, ``shape``, ``padded``, ``shape_source`` and ``analyzer``.

    Examples:
        >>> result = analyze(load_config(
        ...     'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
        ...     ), (64, 64))
        >>> [name for name, _, _ in result['parts']]
        ['backbone', 'decode_head', '(model itself)']
    """
    source = 'given by --shape'
    if shape is None:
        shape, source = default_shape(cfg)
    divisor = size_divisor(cfg)
    padded = tuple(-(-side // divisor) * divisor for side in shape)
    model = build_eval_model(cfg)
    wrapper = TensorForward(
        model, data_samples(cfg.default_scope, tuple(shape), padded))
    analyzer = flop_analyzer(wrapper, (torch.rand(1, 3, *padded), ))
    with torch.no_grad():
        by_operator = analyzer.by_operator()
    params = parameter_count(model)
    return dict(
        params=params[''],
        macs=analyzer.total(),
        attention_macs=by_operator.get(ATTENTION_OP, 0),
        skipped=analyzer.unsupported_ops(),
        parts=model_parts(model, analyzer, params),
        shape=tuple(shape),
        padded=padded,
        shape_source=source,
        analyzer=analyzer)
