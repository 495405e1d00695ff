"""The configs agree with the backbones they build.

* A config named after a variant (``twins-svt-b``, ``pyramid-tnt-ti``,
  ``tnt-s-p16``...) builds that variant: the type matches and its ``arch``
  resolves to the arch-zoo entry of the name.
* All configs of one variant (classification, detection, segmentation)
  build the same backbone structure (everything a checkpoint depends on;
  output selection, drop rates, per-stage norms and the type of
  BatchNorm may differ by task), with position terms stored at the size
  the ImageNet weights were trained at; each variant has all six configs.
* Necks and heads take what actually comes out of the built backbone and
  neck: channels, number of levels and strides (anchors, RoI extractors,
  segmentation heads).
* Every ``paramwise_cfg.custom_keys`` key names parameters of the built
  model, and the optimizer built from the config gives them (and the norms,
  with ``norm_decay_mult``) the intended weight decay.

The last tests feed deliberately broken configs to the same checks.
"""
import copy
import functools
import glob
import inspect
import os
import os.path as osp
import re
from collections import defaultdict

import pytest
import torch
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODELS, init_default_scope
from torch import nn

from mmtnt.models import PCPVT, SVT, TNT, PyramidTNT
from mmtnt.models.utils import resolve_arch

CONFIG_ROOT = osp.join(
    osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'configs')
# Folders whose every config is one of the released variants.
FAMILY_DIRS = ('tnt', 'pyramid_tnt', 'twins')

BACKBONES = {
    'mmtnt.TNT': TNT,
    'mmtnt.PyramidTNT': PyramidTNT,
    'mmtnt.PCPVT': PCPVT,
    'mmtnt.SVT': SVT,
}
# The variant a file name names: (backbone type, arch written in the name).
NAME_PATTERNS = (
    ('mmtnt.PCPVT', r'twins-pcpvt-(small|base|large|s|b|l)'),
    ('mmtnt.SVT', r'twins-svt-(small|base|large|s|b|l)'),
    ('mmtnt.PyramidTNT', r'pyramid-tnt-(tiny|small|medium|base|ti|s|m|b)'),
    # `-legacy`: the legacy pixel-embedding layout of TNT-S weights
    ('mmtnt.TNT', r'tnt-(small|base|s|b)-p16(?:-legacy)?'),
)
# The six configs every variant has, told apart by the file name.
TASKS = {
    'classification': r'_in1k',
    'retinanet-1x': r'^retinanet_.*_fpn_1x_coco$',
    'mask-rcnn-1x': r'^mask-rcnn_.*_fpn_1x_coco$',
    'mask-rcnn-ms-crop-3x': r'^mask-rcnn_.*_fpn_ms-crop-3x_coco$',
    'upernet-160k': r'^upernet_.*_8xb[24]-160k_ade20k-512x512$',
    'semantic-fpn-80k': r'^fpn_.*_8xb[24]-80k_ade20k-512x512$',
}
# Configs that load weights published by another library, with what they
# change for it: `_mmseg_` configs reproduce mmseg's Twins segmentors
# (LayerNorm eps 1e-5, mmseg's recipe).
PUBLISHED_BY = {'mmseg': r'_mmseg_'}
# Backbone arguments such configs may set differently from the variant's
# other configs (the weights were trained with them).
PUBLISHED_ARGS = {'mmseg': {'norm_cfg'}}
# Backbone arguments that may differ between the configs of one variant:
# what is returned, regularisation, freezing and memory options, norms
# added or dropped after stages (dense heads take un-normed or normed
# maps), the initialisation, and TNT's pixel-embedding layout (the legacy
# TNT-S weights have a config of their own). (`arch` is compared after
# resolving it.)
TASK_SPECIFIC_ARGS = {
    'arch', 'out_indices', 'out_type', 'upsample_featmaps', 'final_norm',
    'layout', 'norm_after_stage', 'drop_rate', 'attn_drop_rate',
    'drop_path_rate', 'frozen_stages', 'norm_eval', 'with_cp', 'init_cfg'
}
# The sizes the released ImageNet weights were trained at.
TRAIN_IMG_SIZE = {'mmtnt.TNT': 224}
# Input of the shape checks: a multiple of 64 (PyramidTNT's deepest
# stride), so that every stride is exact.
PROBE_SIZE = 128


def discover_configs():
    """Every config under configs/, relative to it, but the bases."""
    paths = glob.glob(osp.join(CONFIG_ROOT, '**', '*.py'), recursive=True)
    rel = (osp.relpath(p, CONFIG_ROOT) for p in paths)
    return sorted(p for p in rel if '_base_' not in p.split(os.sep))


CONFIGS = discover_configs()


@functools.lru_cache(maxsize=None)
def _load(rel_path):
    # no yapf pass over the merged text: much faster
    return Config.fromfile(
        osp.join(CONFIG_ROOT, rel_path), format_python_code=False)


def load(rel_path):
    """The config at `rel_path` (under configs/), a fresh copy each time."""
    return copy.deepcopy(_load(rel_path))


def config_name(rel_path):
    return osp.splitext(osp.basename(rel_path))[0]


def variant_of(rel_path):
    """(backbone type, arch in the name) of a variant config, or None."""
    name = config_name(rel_path)
    for type_, pattern in NAME_PATTERNS:
        match = re.search(r'(?:^|_)' + pattern + r'(?=_|$)', name)
        if match:
            return type_, match.group(1)
    return None


def task_of(rel_path):
    name = config_name(rel_path)
    tasks = [task for task, rule in TASKS.items() if re.search(rule, name)]
    return tasks[0] if len(tasks) == 1 else None


def canonical_arch(type_, arch):
    """The arch-zoo entry of ``arch`` (a name or a dict)."""
    cls = BACKBONES[type_]
    return resolve_arch(arch, cls.arch_zoo, cls.essential_keys, type_)


def variant_label(rel_path):
    """The variant of a config as `Type-shortest_alias` ('SVT-b'), the same
    for every spelling of the arch in the names ('b' or 'base')."""
    type_, arch = variant_of(rel_path)
    zoo = BACKBONES[type_].arch_zoo
    aliases = [k for k, v in zoo.items() if v == zoo[arch.lower()]]
    return f"{type_.split('.')[1]}-{min(aliases, key=len)}"


# The family directories' configs: the variant in a name elsewhere (e.g.
# configs/custom_data/, which fine-tunes on other data) is not held to the
# published recipes.
VARIANT_CONFIGS = [
    p for p in CONFIGS if variant_of(p) and p.split(os.sep)[0] in FAMILY_DIRS
]
VARIANT_GROUPS = defaultdict(list)
for _path in VARIANT_CONFIGS:
    VARIANT_GROUPS[variant_label(_path)].append(_path)


def with_data_preprocessor(cfg):
    """The model config as the runner builds it (mmpretrain configs keep
    their data preprocessor at the top level)."""
    model_cfg = copy.deepcopy(cfg.model)
    if 'data_preprocessor' in cfg and 'data_preprocessor' not in model_cfg:
        model_cfg.data_preprocessor = copy.deepcopy(cfg.data_preprocessor)
    return model_cfg


def normalize_norm_cfg(norm_cfg):
    """A norm config without what does not change the weights (SyncBN and
    BN share the parameters; requires_grad is a training option)."""
    if not isinstance(norm_cfg, dict):
        return norm_cfg
    norm_cfg = {k: v for k, v in norm_cfg.items() if k != 'requires_grad'}
    if norm_cfg.get('type') in ('SyncBN', 'MMSyncBN', 'BN2d'):
        norm_cfg['type'] = 'BN'
    return norm_cfg


def backbone_structure(backbone_cfg):
    """What a checkpoint of the backbone depends on: the resolved arch and
    every other argument but the task-specific ones, defaults filled in."""
    type_ = backbone_cfg['type']
    cls = BACKBONES[type_]
    params = inspect.signature(cls.__init__).parameters
    structure = {'type': type_}
    for name, param in params.items():
        if name in ('self', 'kwargs') or name in TASK_SPECIFIC_ARGS:
            continue
        value = backbone_cfg.get(name, param.default)
        if name.endswith('norm_cfg'):
            value = normalize_norm_cfg(value)
        if isinstance(value, list):
            value = tuple(value)
        structure[name] = value
    unknown = set(backbone_cfg) - set(params) - {'type', '_scope_'}
    if unknown:
        structure['unknown arguments'] = tuple(sorted(unknown))
    structure['arch'] = canonical_arch(type_, backbone_cfg.get('arch', 's'))
    if type_ == 'mmtnt.PyramidTNT' and structure.get('img_size') is None:
        # the default: the size the arch was trained at
        arch = backbone_cfg.get('arch', 's')
        structure['img_size'] = cls.train_img_size.get(
            arch.lower() if isinstance(arch, str) else None,
            cls.default_img_size)
    return structure


def variant_problems(rel_path, cfg):
    """Where a variant config does not build the variant of its name."""
    type_, arch = variant_of(rel_path)
    backbone = cfg.model.backbone
    if backbone.get('type') != type_:
        return [f'{rel_path} names {type_} ({arch}) but builds '
                f"{backbone.get('type')}"]
    problems = []
    built = canonical_arch(type_, backbone.get('arch', 's'))
    expected = canonical_arch(type_, arch)
    if built != expected:
        diff = {k: (built.get(k), expected.get(k))
                for k in set(built) | set(expected)
                if built.get(k) != expected.get(k)}
        problems.append(f'{rel_path}: arch {backbone.get("arch")!r} is not '
                        f'the named {arch!r}: (config, zoo) {diff}')
    img_size = backbone_structure(backbone).get('img_size')
    if type_ == 'mmtnt.PyramidTNT':
        cls = BACKBONES[type_]
        trained = cls.train_img_size.get(arch.lower(), cls.default_img_size)
    else:
        trained = TRAIN_IMG_SIZE.get(type_)
    if trained is not None and img_size != trained:
        problems.append(f'{rel_path}: position terms stored at {img_size}, '
                        f'but the {arch!r} weights are trained at {trained}')
    return problems


def published_by(rel_path):
    """The library whose published weights a config reproduces, or None."""
    name = config_name(rel_path)
    return next(
        (lib for lib, rule in PUBLISHED_BY.items() if re.search(rule, name)),
        None)


def structure_problems(paths_and_cfgs):
    """Where the configs of one variant build different structures (but for
    the arguments that a config reproducing published weights may set,
    :data:`PUBLISHED_ARGS`)."""
    structures = {
        path: backbone_structure(cfg.model.backbone)
        for path, cfg in paths_and_cfgs
    }
    reference_path = next(
        (p for p in structures if published_by(p) is None),
        next(iter(structures)))
    reference = structures[reference_path]
    problems = []
    for path, structure in structures.items():
        free = PUBLISHED_ARGS.get(published_by(path), set())
        for key in sorted(set(structure) | set(reference)):
            if key not in free and structure.get(key) != reference.get(key):
                problems.append(
                    f'{key}: {structure.get(key)!r} in {path} but '
                    f'{reference.get(key)!r} in {reference_path}')
    return problems


@torch.no_grad()
def probe(cfg):
    """Build the backbone (and neck) of ``cfg`` under its scope and run them
    on one PROBE_SIZE x PROBE_SIZE image.

    Returns:
        tuple: (backbone outputs, neck outputs or None).
    """
    init_default_scope(cfg.get('default_scope', 'mmengine'))
    backbone = revert_sync_batchnorm(zeroed(cfg.model.backbone)).eval()
    in_channels = cfg.model.backbone.get('in_channels', 3)
    x = torch.rand(1, in_channels, PROBE_SIZE, PROBE_SIZE)
    feats = tuple(backbone(x))
    neck_outs = None
    if cfg.model.get('neck') is not None:
        neck = revert_sync_batchnorm(zeroed(cfg.model.neck)).eval()
        neck_outs = tuple(neck(feats))
    return feats, neck_outs


def uninitialised(model_cfg):
    """The module ``model_cfg`` builds, its tensors allocated but not
    initialised (built on the meta device): initialising the largest
    models takes seconds each, and these checks read only names, shapes
    and modules."""
    with torch.device('meta'):
        model = MODELS.build(model_cfg)
    return model.to_empty(device='cpu')


def zeroed(model_cfg):
    """:func:`uninitialised`, with every floating-point tensor zero, for
    the shape probes."""
    model = uninitialised(model_cfg)
    for tensor in (*model.parameters(), *model.buffers()):
        if tensor.is_floating_point():
            tensor.detach().zero_()
    return model


def as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def strides_of(maps):
    return [PROBE_SIZE // m.shape[-1] for m in maps]


def head_input_problems(name, head, maps):
    """A segmentation head's `in_index`/`in_channels`/`feature_strides`
    against the maps it is given."""
    problems = []
    indices = as_list(head.get('in_index', -1))
    if any(not -len(maps) <= i < len(maps) for i in indices):
        return [f'{name}.in_index {indices} but only {len(maps)} maps']
    channels = [maps[i].shape[1] for i in indices]
    if as_list(head.in_channels) != channels:
        problems.append(f'{name}.in_channels {head.in_channels} but the '
                        f'maps at in_index {indices} have {channels}')
    if head.get('feature_strides') is not None:
        strides = [strides_of(maps)[i] for i in indices]
        if list(head.feature_strides) != strides:
            problems.append(f'{name}.feature_strides {head.feature_strides}'
                            f' but the maps have strides {strides}')
    return problems


def channel_problems(cfg):
    """Where necks and heads disagree with the built backbone and neck."""
    feats, neck_outs = probe(cfg)
    model = cfg.model
    problems = []
    if model.get('head') is not None:  # classification
        width = feats[-1].shape[-1] if feats[-1].dim() == 2 else None
        if width is None:
            problems.append('classification head fed a map, not a vector')
        elif model.head.get('in_channels') != width:
            problems.append(f'head.in_channels {model.head.in_channels} but '
                            f'the backbone gives {width}')
        return problems
    maps = neck_outs if neck_outs is not None else feats
    level_channels = [m.shape[1] for m in maps]
    strides = strides_of(maps)
    for name in ('bbox_head', 'rpn_head'):
        head = model.get(name)
        if head is None:
            continue
        if any(c != head.in_channels for c in level_channels):
            problems.append(f'{name}.in_channels {head.in_channels} but the '
                            f'levels have {level_channels}')
        anchors = head.get('anchor_generator')
        if anchors is not None and list(anchors.strides) != strides:
            problems.append(f'{name} anchors at strides {anchors.strides} '
                            f'but the levels have strides {strides}')
    roi_head = model.get('roi_head')
    if roi_head is not None:
        for name in ('bbox_roi_extractor', 'mask_roi_extractor'):
            extractor = roi_head.get(name)
            if extractor is None:
                continue
            if any(c != extractor.out_channels for c in level_channels):
                problems.append(f'roi_head.{name}.out_channels '
                                f'{extractor.out_channels} but the levels '
                                f'have {level_channels}')
            used = list(extractor.featmap_strides)
            if strides[:len(used)] != used:
                problems.append(f'roi_head.{name} pools levels at strides '
                                f'{used} but the levels have {strides}')
    for name in ('decode_head', 'auxiliary_head'):
        for i, head in enumerate(as_list(model.get(name))):
            if head is not None:
                label = name if not isinstance(model[name], list) \
                    else f'{name}[{i}]'
                problems += head_input_problems(label, head, maps)
    if not any(model.get(k) is not None for k in
               ('bbox_head', 'rpn_head', 'decode_head')):
        problems.append('no head this test knows: teach it the new one')
    return problems


def build_model(cfg):
    """The :func:`uninitialised` model of ``cfg``, for the decay checks."""
    init_default_scope(cfg.get('default_scope', 'mmengine'))
    return uninitialised(with_data_preprocessor(cfg))


def decay_problems(cfg, model=None):
    """Where `paramwise_cfg` does not reach the parameters it names, or the
    optimizer built from the config does not give them the decay asked."""
    paramwise = cfg.optim_wrapper.get('paramwise_cfg') or {}
    custom_keys = paramwise.get('custom_keys') or {}
    if model is None:
        model = build_model(cfg)
    names = [name for name, _ in model.named_parameters()]
    problems = [
        f'custom_keys {key!r} matches no parameter' for key in custom_keys
        if not any(key in name for name in names)
    ]
    if problems:
        return problems
    optim_wrapper = build_optim_wrapper(model, copy.deepcopy(
        cfg.optim_wrapper))
    base_decay = optim_wrapper.optimizer.defaults.get('weight_decay', 0)
    decay = {}
    for group in optim_wrapper.optimizer.param_groups:
        for param in group['params']:
            decay[id(param)] = group['weight_decay']
    params = dict(model.named_parameters())
    # mmengine applies the longest matching key.
    for name, param in params.items():
        keys = [k for k in custom_keys if k in name]
        if not keys:
            continue
        key = sorted(keys, key=lambda k: (-len(k), k))[0]
        mult = custom_keys[key].get('decay_mult')
        if mult is not None and decay[id(param)] != base_decay * mult:
            problems.append(f'{name}: weight decay {decay[id(param)]}, '
                            f'expected {base_decay * mult} ({key!r})')
    if paramwise.get('norm_decay_mult') == 0:
        norm_types = (nn.LayerNorm, nn.GroupNorm,
                      nn.modules.batchnorm._BatchNorm)
        for module_name, module in model.named_modules():
            if isinstance(module, norm_types):
                for pname, param in module.named_parameters(recurse=False):
                    if decay[id(param)] != 0:
                        problems.append(f'{module_name}.{pname}: norm with '
                                        f'weight decay {decay[id(param)]}')
    if base_decay and not any(v == base_decay for v in decay.values()):
        problems.append('no parameter keeps the base weight decay')
    return problems


# ---------------------------------------------------------------------------
# the checks, on every config
# ---------------------------------------------------------------------------
def test_configs_found():
    assert len(CONFIGS) > 12, CONFIGS
    assert len(VARIANT_GROUPS) == 12, sorted(VARIANT_GROUPS)


@pytest.mark.parametrize(
    'rel_path', [p for p in CONFIGS if p.split(os.sep)[0] in FAMILY_DIRS])
def test_family_configs_name_a_variant_and_task(rel_path):
    assert variant_of(rel_path) is not None, (
        f'{rel_path}: no variant in the name (e.g. twins-svt-b, '
        'pyramid-tnt-ti, tnt-s-p16)')
    assert task_of(rel_path) is not None, f'{rel_path}: unknown task'


@pytest.mark.parametrize('rel_path', VARIANT_CONFIGS)
def test_config_builds_its_named_variant(rel_path):
    assert variant_problems(rel_path, load(rel_path)) == []


@pytest.mark.parametrize('variant', sorted(VARIANT_GROUPS))
def test_variant_configs_share_backbone_structure(variant):
    paths = VARIANT_GROUPS[variant]
    # every task; more configs of one task may reproduce published weights
    tasks = sorted({task_of(p) for p in paths})
    assert tasks == sorted(TASKS), f'{variant}: configs for {tasks}'
    assert structure_problems([(p, load(p)) for p in paths]) == []


@pytest.mark.parametrize('rel_path', CONFIGS)
def test_necks_and_heads_take_backbone_outputs(rel_path):
    assert channel_problems(load(rel_path)) == []


@pytest.mark.parametrize('rel_path', CONFIGS)
def test_paramwise_rules_reach_parameters(rel_path):
    cfg = load(rel_path)
    paramwise = cfg.optim_wrapper.get('paramwise_cfg') or {}
    if paramwise.get('custom_keys') or paramwise.get('norm_decay_mult') == 0:
        assert decay_problems(cfg) == []


@pytest.mark.parametrize('rel_path', VARIANT_CONFIGS)
def test_variant_configs_use_the_fused_adamw(rel_path):
    optimizer = load(rel_path).optim_wrapper.optimizer
    assert (optimizer.type, optimizer.get('fused')) == ('AdamW', True)


def test_ade20k_160k_exempts_backbone_norms_but_not_head_batchnorms():
    """The official `norm` key: no decay on the backbone's norms; the
    decode and auxiliary heads' BatchNorms (mmcv's `bn`) keep it."""
    cfg = load(osp.join('twins',
                        'upernet_twins-pcpvt-s_8xb4-160k_ade20k-512x512.py'))
    model = build_model(cfg)
    optim_wrapper = build_optim_wrapper(model, copy.deepcopy(
        cfg.optim_wrapper))
    decay = {
        id(param): group['weight_decay']
        for group in optim_wrapper.optimizer.param_groups
        for param in group['params']
    }
    base = cfg.optim_wrapper.optimizer.weight_decay
    for name, module in model.named_modules():
        if not isinstance(module, (nn.LayerNorm, nn.modules.batchnorm.
                                   _BatchNorm)):
            continue
        expected = 0 if name.startswith('backbone.') else base
        for param in module.parameters(recurse=False):
            assert decay[id(param)] == expected, name


# ---------------------------------------------------------------------------
# the checks find broken configs
# ---------------------------------------------------------------------------
def test_checks_catch_a_wrong_arch():
    path = osp.join('twins', 'retinanet_twins-pcpvt-b_fpn_1x_coco.py')
    cfg = load(path)
    assert variant_problems(path, cfg) == []
    cfg.model.backbone.arch = 's'
    assert variant_problems(path, cfg)
    cfg.model.backbone.arch = 'b'
    cfg.model.backbone.type = 'mmtnt.SVT'
    assert variant_problems(path, cfg)


def test_checks_catch_a_diverging_structure():
    cls_path = osp.join('pyramid_tnt',
                        'pyramid-tnt-ti_8xb128_in1k-192px.py')
    det_path = osp.join('pyramid_tnt',
                        'retinanet_pyramid-tnt-ti_fpn_1x_coco.py')
    cls_cfg, det_cfg = load(cls_path), load(det_path)
    pair = [(cls_path, cls_cfg), (det_path, det_cfg)]
    assert structure_problems(pair) == []
    det_cfg.model.backbone.img_size = 256
    assert structure_problems(pair)
    assert variant_problems(det_path, det_cfg)
    det_cfg.model.backbone.img_size = 192
    det_cfg.model.backbone.sr_ratios = (8, 4, 2, 1)
    assert structure_problems(pair)
    det_cfg.model.backbone.sr_ratios = (4, 2, 1, 1)
    det_cfg.model.backbone.qkv_bias = True
    assert structure_problems(pair)


def test_checks_catch_wrong_channels_and_strides():
    cfg = load(
        osp.join('twins', 'upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py'))
    assert channel_problems(cfg) == []
    cfg.model.decode_head.in_channels = [64, 128, 320, 512]  # PCPVT's
    assert channel_problems(cfg)

    cfg = load(osp.join('tnt', 'retinanet_tnt-s-p16_fpn_1x_coco.py'))
    assert channel_problems(cfg) == []
    # one level too fine: the anchors no longer sit at the levels' strides
    cfg.model.neck[0].scales = (4, 2, 1)
    assert any('strides' in p for p in channel_problems(cfg))


def test_checks_catch_dead_custom_keys():
    cfg = load(
        osp.join('twins',
                 'upernet_twins-pcpvt-s_8xb4-160k_ade20k-512x512.py'))
    model = build_model(cfg)
    assert decay_problems(cfg, model) == []
    # mmseg's Twins configs name the position encodings `pos_block`, which
    # matches nothing in mmtnt (nor in mmseg's own Twins).
    cfg.optim_wrapper.paramwise_cfg.custom_keys = {
        'pos_block': dict(decay_mult=0.)
    }
    assert decay_problems(cfg, model)


# ---------------------------------------------------------------------------
# the published recipes (see each config's header)
# ---------------------------------------------------------------------------
def recipe_of(rel_path):
    """(optimizer lr, weight decay, schedule) a dense config must keep."""
    type_, _ = variant_of(rel_path)
    twins = type_ in ('mmtnt.PCPVT', 'mmtnt.SVT')
    task = task_of(rel_path)
    if task == 'retinanet-1x':  # Twins: PVT setting; TNTs: PyramidTNT's
        return 1e-4, 1e-4 if twins else 0.05, ('epochs', 12, [8, 11])
    if task == 'mask-rcnn-1x':
        lr, wd = (2e-4, 1e-4) if twins else (1e-4, 0.05)
        return lr, wd, ('epochs', 12, [8, 11])
    if task == 'mask-rcnn-ms-crop-3x':
        return 1e-4, 0.05, ('epochs', 36, [27, 33])
    if task == 'upernet-160k':
        return 6e-5, 0.01, ('iters', 160000, 1.0)
    if task == 'semantic-fpn-80k':
        return 1e-4, 1e-4, ('iters', 80000, 0.9)
    return None


@pytest.mark.parametrize(
    'rel_path', [p for p in VARIANT_CONFIGS if task_of(p) != 'classification'])
def test_dense_config_keeps_its_recipe(rel_path):
    cfg = load(rel_path)
    lr, wd, (unit, length, shape) = recipe_of(rel_path)
    optimizer = cfg.optim_wrapper.optimizer
    assert (optimizer.type, optimizer.lr, optimizer.weight_decay) == (
        'AdamW', lr, wd)
    # 16 images per iteration, 8 GPUs x 2; the released UperNet PCPVT-S log
    # ran 32, 8 GPUs x 4, as did mmseg's Semantic FPNs
    mmseg = published_by(rel_path) == 'mmseg'
    batch = 4 if 'upernet_twins-pcpvt-s_' in rel_path or (
        mmseg and task_of(rel_path) == 'semantic-fpn-80k') else 2
    assert f'_8xb{batch}-' in rel_path or '_coco' in rel_path
    assert cfg.train_dataloader.batch_size == batch
    assert cfg.auto_scale_lr.base_batch_size == 8 * batch
    schedulers = {s.type: s for s in cfg.param_scheduler}
    if unit == 'epochs':
        assert cfg.train_cfg.max_epochs == length
        assert schedulers['MultiStepLR'].milestones == shape
        assert schedulers['LinearLR'].end == 500
        assert cfg.model.backbone.drop_path_rate == 0.2
    else:
        assert cfg.train_cfg.max_iters == length
        poly = schedulers['PolyLR']
        # The official Twins FPN configs decay to min_lr 1e-6; UperNet to 0.
        # mmseg's FPNs keep the LR constant (their minimum is the LR).
        eta_min = 1e-6 if task_of(rel_path) == 'semantic-fpn-80k' else 0.0
        if mmseg and task_of(rel_path) == 'semantic-fpn-80k':
            eta_min = lr
        assert (poly.power, poly.eta_min, poly.end) == (shape, eta_min,
                                                        length)
        if 'LinearLR' in schedulers:  # UperNet's warm-up
            assert schedulers['LinearLR'].end == poly.begin == 1500
    if task_of(rel_path) == 'mask-rcnn-ms-crop-3x':
        pipeline = [t.type for t in cfg.train_dataloader.dataset.pipeline]
        assert 'RandomChoice' in pipeline, pipeline


@pytest.mark.parametrize(
    'rel_path',
    [p for p in VARIANT_CONFIGS if task_of(p) == 'classification'])
def test_classification_config_keeps_its_schedule(rel_path):
    """The official runs' lengths and warm-ups: TNT and PyramidTNT train
    310 epochs on timm's cosine (its warm-up laid over the 300-epoch cosine,
    then 10 cool-down epochs at the minimum lr; test_official_lr_and_ema.py
    checks every lr) and resize with a random interpolation; Twins trains
    300, and SVT-L warms up for 20 epochs (its released log)."""
    cfg = load(rel_path)
    name = config_name(rel_path)
    crop = cfg.train_pipeline[1]
    if name.startswith('twins'):
        warmup, cosine = cfg.param_scheduler
        assert (warmup.type, cosine.type) == ('LinearLR', 'CosineAnnealingLR')
        assert warmup.end == cosine.begin
        assert cosine.T_max == cosine.end - cosine.begin
        assert cosine.end == 300
        assert cfg.train_cfg.max_epochs == 300
        assert warmup.end == (20 if name.startswith('twins-svt-large') else 5)
        assert crop.type == 'RandomResizedCrop'
        assert crop.interpolation == 'bicubic'
    else:
        cosine, = cfg.param_scheduler
        assert (cosine.type, cosine.T_max) == ('mmtnt.WarmupCosineLR', 300)
        assert cfg.train_cfg.max_epochs == 310
        assert cosine.warmup_steps == (20 if name.startswith('pyramid') else 5)
        assert crop.type == 'RandomChoice'
        assert sorted(t[0]['interpolation']
                      for t in crop.transforms) == ['bicubic', 'bilinear']
