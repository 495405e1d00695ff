"""Convert public Twins (PCPVT, SVT) checkpoints into mmtnt's layout.

Key layouts: ``official`` (Meituan-AutoML/Twins, timm: ``blocks.i.j``),
``mmpretrain`` (``stages.i.j``), ``mmseg`` (``layers.i.j``, GSA as
``nn.MultiheadAttention``) and ``mmtnt``; each goes through the official
names (plus ``stage_norms.i``) to mmtnt's. Detectors and segmentors convert
whole (:mod:`mmtnt.converters.dense`) unless ``backbone_only`` is set.
"""
import re

from .common import (classifier_keys, count_numbered, detect_format,
                     extract_state_dict, fuse_projections, match_arch,
                     rename_keys, split_classifier, to_mmengine_checkpoint)
from .dense import (HEAD_LAYOUTS, count_classes, dataset_meta,
                    detect_head_layout, is_dense, split_dense)

# What mmpretrain and mmseg name alike (mmcv's PatchEmbed and FFN, the
# position encodings) -> official names.
_OPENMMLAB_TO_OFFICIAL = [
    (r'^patch_embeds\.(\d+)\.projection\.', r'patch_embeds.\1.proj.'),
    (r'\.ffn\.layers\.0\.0\.', '.mlp.fc1.'),
    (r'\.ffn\.layers\.1\.', '.mlp.fc2.'),
    (r'^position_encodings\.(\d+)\.proj\.', r'pos_block.\1.proj.0.'),
]

_MMPRETRAIN_TO_OFFICIAL = _OPENMMLAB_TO_OFFICIAL + [
    (r'^stages\.(\d+)\.(\d+)\.', r'blocks.\1.\2.'),
    (r'^norm_after_stage(\d+)\.', r'stage_norms.\1.'),
]

_MMSEG_TO_OFFICIAL = _OPENMMLAB_TO_OFFICIAL + [
    (r'^layers\.(\d+)\.(\d+)\.', r'blocks.\1.\2.'),
    (r'\.attn\.attn\.out_proj\.', '.attn.proj.'),
    (r'^norm_list\.(\d+)\.', r'stage_norms.\1.'),
]

_OFFICIAL_TO_MMTNT = [
    (r'^patch_embeds\.(\d+)\.', r'stages.\1.patch_embed.'),
    (r'^blocks\.(\d+)\.(\d+)\.', r'stages.\1.blocks.\2.'),
    (r'\.attn\.norm\.', '.attn.sr_norm.'),
    (r'^pos_block\.(\d+)\.proj\.0\.', r'stages.\1.pos_conv.proj.'),
    (r'^stage_norms\.(\d+)\.', r'stages.\1.norm.'),
]

# The key layouts, told apart by the names of their transformer blocks.
_FORMATS = [
    ('mmtnt', (r'^stages\.\d+\.blocks\.\d+\.', )),
    ('mmpretrain', (r'^stages\.\d+\.\d+\.', )),
    ('mmseg', (r'^layers\.\d+\.\d+\.', )),
    ('official', (r'^blocks\.\d+\.\d+\.', )),
]

_MMTNT_KEY = re.compile(
    r'^stages\.\d+\.('
    r'patch_embed\.(proj|norm)'
    r'|blocks\.\d+\.(norm1|norm2|mlp\.fc1|mlp\.fc2'
    r'|attn\.(q|kv|qkv|sr|sr_norm|proj))'
    r'|pos_conv\.proj|norm)\.(weight|bias)$')


def detect_twins_format(state_dict):
    """``'official'`` (also timm), ``'mmpretrain'``, ``'mmseg'`` or
    ``'mmtnt'``: the key layout of Twins backbone weights."""
    return detect_format(state_dict, _FORMATS, 'Twins')


def _from_mmpretrain(state_dict):
    return rename_keys(state_dict, _MMPRETRAIN_TO_OFFICIAL)


def _from_mmseg(state_dict):
    state_dict = rename_keys(state_dict, _MMSEG_TO_OFFICIAL)
    official = {}
    for key, value in state_dict.items():
        match = re.match(r'^(.*\.attn)\.attn\.in_proj_(weight|bias)$', key)
        if match:
            # nn.MultiheadAttention stacks the q and kv projections.
            prefix, kind = match.groups()
            dims = value.shape[0] // 3
            official[f'{prefix}.q.{kind}'] = value[:dims]
            official[f'{prefix}.kv.{kind}'] = value[dims:]
        else:
            official[key] = value
    last = count_numbered(official, 'patch_embeds.') - 1
    if f'stage_norms.{last}.weight' in official:
        # mmseg normalises each stage with norm_list and ignores the
        # official final norm that twins2mmseg.py leaves in.
        official.pop('norm.weight', None)
        official.pop('norm.bias', None)
    return official


def _official_to_mmtnt(state_dict):
    last = count_numbered(state_dict, 'patch_embeds.') - 1
    # The official final norm is the last stage's norm.
    state_dict = rename_keys(state_dict,
                             [(r'^norm\.', f'stage_norms.{last}.')])
    state_dict = rename_keys(state_dict, _OFFICIAL_TO_MMTNT)
    # GSA without spatial reduction: mmtnt fuses q and kv.
    fused = fuse_projections(state_dict, ('q', 'kv'), skip_with='sr')
    unknown = sorted(k for k in fused if not _MMTNT_KEY.match(k))
    if unknown:
        raise ValueError(f'Unexpected keys in a Twins checkpoint: {unknown}')
    return fused


def describe_twins(state_dict):
    """``model`` (``'PCPVT'``/``'SVT'``), ``arch`` (a name in its
    ``arch_zoo``, else the sizes) and ``norm_after_stage`` of mmtnt-layout
    weights."""
    from mmtnt.models.backbones.twins import PCPVT, SVT
    num_stages = count_numbered(state_dict, 'stages.')
    depths, dims, mlp_ratios, sr_ratios = [], [], [], []
    lsa = False
    for i in range(num_stages):
        prefix = f'stages.{i}.'
        depths.append(count_numbered(state_dict, prefix + 'blocks.'))
        dims.append(state_dict[prefix + 'patch_embed.proj.weight'].shape[0])
        hidden = state_dict[prefix + 'blocks.0.mlp.fc1.weight'].shape[0]
        mlp_ratios.append(hidden // dims[-1])
        sr = next((v for k, v in state_dict.items()
                   if k.startswith(prefix) and k.endswith('.attn.sr.weight')),
                  None)
        sr_ratios.append(1 if sr is None else sr.shape[-1])
        # SVT's block 0 is LSA: a fused qkv in a stage that sub-samples
        # (PCPVT's has q and kv there).
        lsa = lsa or (sr is not None and
                      prefix + 'blocks.0.attn.qkv.weight' in state_dict)
    model = SVT if lsa else PCPVT
    sizes = dict(
        embed_dims=dims,
        depths=depths,
        mlp_ratios=mlp_ratios,
        sr_ratios=sr_ratios)
    arch = match_arch(model.arch_zoo, ('s', 'b', 'l'), sizes)
    norms = [
        f'stages.{i}.norm.weight' in state_dict for i in range(num_stages)
    ]
    return dict(model=model.__name__, arch=arch, norm_after_stage=norms)


_CONVERTERS = {
    'official': lambda sd: _official_to_mmtnt(dict(sd)),
    'mmpretrain': lambda sd: _official_to_mmtnt(_from_mmpretrain(sd)),
    'mmseg': lambda sd: _official_to_mmtnt(_from_mmseg(sd)),
    'mmtnt': dict,
}


def _dense_backbone(state_dict):
    """A whole model's backbone without the ``head`` and final ``norm`` the
    official dense code keeps unused, ``norm_list.i`` as stage norms."""
    used = {
        k: v
        for k, v in state_dict.items() if not re.match(r'^(norm|head)\.', k)
    }
    return rename_keys(used, [(r'^norm_list\.(\d+)\.', r'stage_norms.\1.')])


# The sources of whole models, by backbone layout.
_DENSE_SOURCES = {
    'mmseg': "mmseg's Twins, LayerNorm eps 1e-5",
    'official': 'the official Twins {task} code ({library})',
    'mmpretrain': "mmpretrain's Twins",
    'mmtnt': 'mmtnt',
}
# mmtnt's configs per head layout ({v}: variant, {b}: images per GPU);
# mmseg's segmentors have their own (LayerNorm eps 1e-5, mmseg's recipe).
_MMSEG_CONFIGS = {
    'upernet': 'upernet_twins-{v}_mmseg_8xb{b}-160k_ade20k-512x512.py',
    'semantic-fpn': 'fpn_twins-{v}_mmseg_8xb4-80k_ade20k-512x512.py',
}
_CONFIGS = {
    'upernet': 'upernet_twins-{v}_8xb{b}-160k_ade20k-512x512.py',
    'semantic-fpn': 'fpn_twins-{v}_8xb2-80k_ade20k-512x512.py',
    'retinanet': 'retinanet_twins-{v}_fpn_1x_coco.py',
    'mask-rcnn': 'mask-rcnn_twins-{v}_fpn_1x_coco.py',
}
# What the configs' data sets have, and where the classes are set.
_NUM_CLASSES = {
    'upernet': (150, ('decode_head', 'auxiliary_head')),
    'semantic-fpn': (150, ('decode_head', )),
    'retinanet': (80, ('bbox_head', )),
    'mask-rcnn': (80, ('roi_head.bbox_head', 'roi_head.mask_head')),
}


def _dense_meta(meta, layout, heads):
    """Add a whole model's source, head layout, classes, mmtnt config and
    the ``--cfg-options`` it needs to ``meta``."""
    task = HEAD_LAYOUTS[layout].task
    library = 'mmseg 0.x' if task == 'segmentation' else 'mmdet 2.x'
    meta.update(
        source=_DENSE_SOURCES[meta['source_format']].format(
            task='segmentation' if task == 'segmentation' else 'detection',
            library=library),
        head_layout=layout,
        task=task,
        num_classes=count_classes(layout, heads))
    options = []
    config = None
    if isinstance(meta['arch'], str):
        variant = f"{meta['model'].lower()}-{meta['arch']}"
        templates = _MMSEG_CONFIGS if meta['source_format'] == 'mmseg' \
            and layout in _MMSEG_CONFIGS else _CONFIGS
        config = 'configs/twins/' + templates[layout].format(
            v=variant, b=4 if variant == 'pcpvt-s' else 2)
        if meta['source_format'] == 'mmseg' and layout not in _MMSEG_CONFIGS:
            options.append('model.backbone.norm_cfg.eps=1e-5')
    # mmtnt's dense configs: no norm after PCPVT's stages, one after SVT's.
    norms = meta['norm_after_stage']
    if norms != [meta['model'] == 'SVT'] * len(norms):
        options.append(f'model.backbone.norm_after_stage={norms}'.replace(
            ' ', ''))
    classes, heads_with_classes = _NUM_CLASSES[layout]
    if meta['num_classes'] != classes:
        options += [
            f'model.{head}.num_classes={meta["num_classes"]}'
            for head in heads_with_classes
        ]
    meta.update(config=config, cfg_options=options)
    return meta


def convert_twins(checkpoint, backbone_only=False):
    """Convert a Twins checkpoint of any public layout into mmtnt's layout.

    Args:
        checkpoint (dict): A loaded checkpoint (bare or under
            ``state_dict``/``model``) of a classifier or of a whole
            detector or segmentor.
        backbone_only (bool): Keep only the backbone of a detector or
            segmentor. Defaults to False.

    Returns:
        dict: ``{'meta': ..., 'state_dict': ...}``, the backbone under
        ``backbone.``, other weights under ``head.fc.`` or their names.
        ``meta`` has ``source_format``, ``model``, ``arch`` and
        ``norm_after_stage``; for whole models also ``source``,
        ``head_layout``, ``task``, ``num_classes``, ``config``,
        ``cfg_options`` and, where recorded, ``dataset_meta``.

    Examples:
        >>> import timm
        >>> from mmtnt.converters import convert_twins
        >>> model = timm.create_model('twins_svt_small')
        >>> meta = convert_twins(model.state_dict())['meta']
        >>> meta['source_format'], meta['model'], meta['arch']
        ('official', 'SVT', 's')
    """
    state_dict = extract_state_dict(checkpoint)
    if is_dense(state_dict):
        backbone, heads = split_dense(state_dict)
        source_format = detect_twins_format(backbone)
        backbone = _CONVERTERS[source_format](_dense_backbone(backbone))
        meta = dict(source_format=source_format, **describe_twins(backbone))
        if backbone_only:
            return to_mmengine_checkpoint(backbone, meta)
        layout = detect_head_layout(heads)
        meta = _dense_meta(meta, layout, heads)
        classes = dataset_meta(checkpoint)
        if classes:
            meta['dataset_meta'] = classes
        return to_mmengine_checkpoint(backbone, meta, heads)
    backbone, head = split_classifier(state_dict)
    source_format = detect_twins_format(backbone)
    backbone = _CONVERTERS[source_format](backbone)
    meta = dict(source_format=source_format, **describe_twins(backbone))
    return to_mmengine_checkpoint(backbone, meta, classifier_keys(head))
