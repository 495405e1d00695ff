"""Whole detectors and segmentors: the neck and heads beside the backbone.

A family's converter maps the backbone; this module tells which of
:data:`HEAD_LAYOUTS` the rest is and checks every key has a place in it.
Those heads keep their key names across mmseg 0.x/1.x and mmdet 2.x/3.x, so
they are copied as they are.
"""
import re
from collections import namedtuple

# Top-level modules of detectors and segmentors besides the backbone.
DENSE_PREFIXES = ('neck.', 'decode_head.', 'auxiliary_head.', 'rpn_head.',
                  'roi_head.', 'bbox_head.')
# Hold no weights a model needs (older files may still have them).
_DROPPED_PREFIXES = ('data_preprocessor.', )

# mmcv's ConvModule: a convolution with an optional BatchNorm (``bn``).
_CONV_MODULE = (r'(conv\.(weight|bias)'
                r'|bn\.(weight|bias|running_mean|running_var'
                r'|num_batches_tracked))$')
_PARAM = r'(weight|bias)$'
# mmcv/mmdet/mmseg's FPN neck.
_FPN_NECK = r'^neck\.(lateral_convs|fpn_convs)\.\d+\.' + _CONV_MODULE

#: A model that converts whole: task, name, the key prefixes that identify
#: it and the patterns every key of its neck and heads matches.
HeadLayout = namedtuple('HeadLayout', 'task name markers patterns')

HEAD_LAYOUTS = {
    'upernet':
    HeadLayout(
        'segmentation', 'UperNet (mmseg UPerHead + FCNHead)',
        ('decode_head.psp_modules.', 'decode_head.fpn_bottleneck.'),
        (r'^decode_head\.psp_modules\.\d+\.1\.' + _CONV_MODULE,
         r'^decode_head\.(bottleneck|fpn_bottleneck)\.' + _CONV_MODULE,
         r'^decode_head\.(lateral_convs|fpn_convs)\.\d+\.' + _CONV_MODULE,
         r'^auxiliary_head\.convs\.\d+\.' + _CONV_MODULE,
         r'^(decode_head|auxiliary_head)\.conv_seg\.' + _PARAM)),
    'semantic-fpn':
    HeadLayout('segmentation', 'Semantic FPN (FPN + mmseg FPNHead)',
               ('decode_head.scale_heads.', ),
               (_FPN_NECK,
                r'^decode_head\.scale_heads\.\d+\.\d+\.' + _CONV_MODULE,
                r'^decode_head\.conv_seg\.' + _PARAM)),
    'retinanet':
    HeadLayout('detection', 'RetinaNet (FPN + mmdet RetinaHead)',
               ('bbox_head.retina_cls.', ),
               (_FPN_NECK,
                r'^bbox_head\.(cls_convs|reg_convs)\.\d+\.' + _CONV_MODULE,
                r'^bbox_head\.retina_(cls|reg)\.' + _PARAM)),
    'mask-rcnn':
    HeadLayout(
        'instance segmentation',
        'Mask R-CNN (FPN + mmdet RPNHead + StandardRoIHead)',
        ('rpn_head.', 'roi_head.mask_head.'),
        (_FPN_NECK, r'^rpn_head\.rpn_(conv|cls|reg)\.' + _PARAM,
         r'^roi_head\.bbox_head\.(shared_fcs\.\d+|fc_cls|fc_reg)\.' + _PARAM,
         r'^roi_head\.mask_head\.(convs\.\d+\.conv|upsample|conv_logits)'
         r'\.' + _PARAM)),
}


def is_dense(state_dict):
    """Whether some key is under a neck or dense head (a whole model)."""
    return any(k.startswith(DENSE_PREFIXES) for k in state_dict)


def split_dense(state_dict):
    """Split a whole model's weights into backbone (``backbone.`` stripped)
    and the rest (keys unchanged, data preprocessors dropped)."""
    backbone, rest = {}, {}
    for key, value in state_dict.items():
        if key.startswith('backbone.'):
            backbone[key[len('backbone.'):]] = value
        elif not key.startswith(_DROPPED_PREFIXES):
            rest[key] = value
    return backbone, rest


def _group(keys, limit=30):
    """Keys grouped by module, at most ``limit`` groups named."""
    groups = {}
    for key in keys:
        module, param = key.rsplit('.', 1) if '.' in key else ('', key)
        groups.setdefault(module, []).append(param)
    names = [
        f'{m}.{p[0]}' if len(p) == 1 else f'{m}.{{{",".join(sorted(p))}}}'
        for m, p in sorted(groups.items())
    ]
    if len(names) > limit:
        names = names[:limit] + [f'... ({len(names) - limit} more modules)']
    return ', '.join(names)


def detect_head_layout(heads):
    """The key of :data:`HEAD_LAYOUTS` that neck and head weights have;
    ValueError listing the keys when none fits."""
    found = [
        name for name, layout in HEAD_LAYOUTS.items()
        if all(any(k.startswith(m) for k in heads) for m in layout.markers)
    ]
    if len(found) != 1:
        known = ', '.join(v.name for v in HEAD_LAYOUTS.values())
        raise ValueError(
            'Not a detector or segmentor whose heads mmtnt has configs for '
            f'({known}); could not place: {_group(heads)}. Convert the '
            'backbone alone with --backbone-only (backbone_only=True).')
    name = found[0]
    patterns = [re.compile(p) for p in HEAD_LAYOUTS[name].patterns]
    unplaced = [k for k in heads if not any(p.match(k) for p in patterns)]
    if unplaced:
        raise ValueError(
            f'The heads look like {HEAD_LAYOUTS[name].name}, but these '
            f'keys have no place in it: {_group(unplaced)}. Convert the '
            'backbone alone with --backbone-only (backbone_only=True).')
    return name


def count_classes(layout, heads):
    """The number of classes (without background) the heads predict."""
    if layout in ('upernet', 'semantic-fpn'):
        return heads['decode_head.conv_seg.weight'].shape[0]
    if layout == 'retinanet':
        # sigmoid scores: one channel per class and anchor
        anchors = heads['bbox_head.retina_reg.weight'].shape[0] // 4
        return heads['bbox_head.retina_cls.weight'].shape[0] // anchors
    # softmax scores with a background class
    return heads['roi_head.bbox_head.fc_cls.weight'].shape[0] - 1


def dataset_meta(checkpoint):
    """The ``classes`` (and ``palette``) a checkpoint records, as plain
    lists, from ``meta['dataset_meta']`` (mmengine) or ``meta['CLASSES']``
    and ``meta['PALETTE']`` (mmcv 1.x); empty when there are none."""
    meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
    if not isinstance(meta, dict):
        return {}
    source = meta.get('dataset_meta')
    if not isinstance(source, dict):
        source = dict(classes=meta.get('CLASSES'), palette=meta.get('PALETTE'))
    out = {}
    for key in ('classes', 'palette'):
        value = source.get(key)
        if isinstance(value, (list, tuple)):
            out[key] = [
                list(v) if isinstance(v, (list, tuple)) else v for v in value
            ]
    return out
