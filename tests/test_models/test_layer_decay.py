"""Layer-wise learning-rate decay: every family's ``get_layer_depth`` in
mmpretrain's constructor (classifiers) and in
``mmtnt.LayerDecayOptimWrapperConstructor`` (detectors and segmentors).

The expected depths are written out here from the tiny archs' block
counts, not read from ``get_layer_depth``: embeddings 0, the blocks in
order, what a stage holds outside its blocks with the block before it,
Twins' position encoding with the block it follows, final norms, necks and
heads last.
"""
import re

import pytest
import torch
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.structures import InstanceData, PixelData
from tiny_backbones import PYRAMID_TNT_TINY, SVT_TINY, TNT_TINY, TWINS_TINY
from torch import nn

from mmtnt.registry import MODELS

BASE_LR, BASE_WD, DECAY = 1e-3, 0.05, 0.5
PARAMWISE = dict(
    layer_decay_rate=DECAY,
    norm_decay_mult=0.,
    bias_decay_mult=0.5,
    custom_keys={'_pos': dict(decay_mult=0.)})
SIZE = 64
BACKBONE_CFGS = {
    'TNT': dict(type='mmtnt.TNT', arch=TNT_TINY, img_size=SIZE),
    'PyramidTNT': dict(type='mmtnt.PyramidTNT', arch=PYRAMID_TNT_TINY,
                       img_size=SIZE),
    'PCPVT': dict(type='mmtnt.PCPVT', arch=TWINS_TINY),
    'SVT': dict(type='mmtnt.SVT', arch=SVT_TINY),
}
# Blocks per stage of each tiny arch (TNT: one stage).
STAGE_DEPTHS = {
    'TNT': [TNT_TINY['num_layers']],
    'PyramidTNT': PYRAMID_TNT_TINY['depths'],
    'PCPVT': TWINS_TINY['depths'],
    'SVT': SVT_TINY['depths'],
}
EMBEDDINGS = {
    'TNT': r'(word_embed|word_pos|sentence_proj|cls_token|sentence_pos)\.?',
    'PyramidTNT': r'(stem|word_pos|sentence_pos)\.?',
    'PCPVT': r'stages\.0\.patch_embed\.',
    'SVT': r'stages\.0\.patch_embed\.',
}


def expected_depth(family, name):
    """(depth, number of depths) of parameter ``name`` of a model."""
    depths = STAGE_DEPTHS[family]
    last = sum(depths) + 1
    if not name.startswith('backbone.'):
        return last, last + 1
    name = name[len('backbone.'):]
    if re.match(EMBEDDINGS[family], name):
        return 0, last + 1
    match = re.match(r'(?:stages\.(\d+)\.)?(\w+)(?:\.(\d+))?', name)
    stage = int(match.group(1) or 0)
    before = sum(depths[:stage])
    part = match.group(2)
    if part == 'blocks':
        depth = before + int(match.group(3)) + 1
    elif part in ('patch_embed', 'word_merge', 'sentence_merge',
                  'relative_pos'):
        depth = before
    elif part == 'pos_conv':
        depth = before + 1
    elif part == 'norm' and match.group(1) is not None and \
            stage < len(depths) - 1:
        depth = before + depths[stage]
    else:  # final norms, upsampling
        depth = last
    return depth, last + 1


def expected_decay(name, module):
    """mmpretrain's rules: a custom key, else norms, biases, the rest."""
    if '_pos' in name:
        return 0.
    if isinstance(module, (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm2d)):
        return 0.
    if name.endswith('.bias'):
        return BASE_WD * 0.5
    return BASE_WD


def classifier(family):
    backbone = dict(BACKBONE_CFGS[family])
    return 'mmpretrain', dict(
        type='mmpretrain.ImageClassifier',
        data_preprocessor=dict(type='mmpretrain.ClsDataPreprocessor'),
        backbone=backbone,
        head=dict(
            type='mmpretrain.LinearClsHead',
            num_classes=3,
            in_channels=32 if family != 'TNT' else 16))


def segmentor(family):
    backbone = dict(BACKBONE_CFGS[family], out_type='featmap')
    channels = 32 if family != 'TNT' else 16
    return 'mmseg', dict(
        type='mmseg.EncoderDecoder',
        data_preprocessor=dict(
            type='mmseg.SegDataPreProcessor', size=(SIZE, SIZE)),
        backbone=backbone,
        decode_head=dict(
            type='mmseg.FCNHead',
            in_channels=channels,
            channels=8,
            num_convs=1,
            num_classes=3))


def detector(family):
    backbone = dict(
        BACKBONE_CFGS[family], out_type='featmap', out_indices=(2, 3))
    # the last two stages' channels and strides
    channels, strides = ([32, 32], [32, 64]) if family == 'PyramidTNT' \
        else ([16, 32], [16, 32])
    return 'mmdet', dict(
        type='mmdet.RetinaNet',
        data_preprocessor=dict(type='mmdet.DetDataPreprocessor'),
        backbone=backbone,
        neck=dict(
            type='mmdet.FPN',
            in_channels=channels,
            out_channels=8,
            num_outs=2),
        bbox_head=dict(
            type='mmdet.RetinaHead',
            num_classes=2,
            in_channels=8,
            stacked_convs=1,
            feat_channels=8,
            anchor_generator=dict(
                type='AnchorGenerator',
                octave_base_scale=4,
                scales_per_octave=1,
                ratios=[1.0],
                strides=strides),
            bbox_coder=dict(type='DeltaXYWHBBoxCoder'),
            loss_cls=dict(type='FocalLoss', use_sigmoid=True),
            loss_bbox=dict(type='L1Loss')),
        train_cfg=dict(
            assigner=dict(
                type='MaxIoUAssigner', pos_iou_thr=0.5, neg_iou_thr=0.4),
            sampler=dict(type='PseudoSampler'),
            allowed_border=-1,
            pos_weight=-1,
            debug=False))


def batch(scope):
    """Two random images with a label, a label map or a box each."""
    inputs = [torch.randint(0, 256, (3, SIZE, SIZE), dtype=torch.uint8)
              for _ in range(2)]
    if scope == 'mmpretrain':
        from mmpretrain.structures import DataSample
        samples = [DataSample().set_gt_label(i) for i in range(2)]
    elif scope == 'mmseg':
        from mmseg.structures import SegDataSample
        samples = [
            SegDataSample(
                gt_sem_seg=PixelData(
                    data=torch.randint(0, 3, (1, SIZE, SIZE))))
            for _ in range(2)
        ]
    else:
        from mmdet.structures import DetDataSample
        samples = []
        for _ in range(2):
            sample = DetDataSample(
                metainfo=dict(img_shape=(SIZE, SIZE), ori_shape=(SIZE, SIZE),
                              scale_factor=(1., 1.)))
            sample.gt_instances = InstanceData(
                bboxes=torch.tensor([[8., 8., 40., 48.]]),
                labels=torch.tensor([1]))
            samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


# Classifiers take mmpretrain's constructor (they forward get_layer_depth
# to the backbone); detectors and segmentors mmtnt's, in their own scopes.
MMPRETRAIN = 'mmpretrain.LearningRateDecayOptimWrapperConstructor'
MMTNT = 'mmtnt.LayerDecayOptimWrapperConstructor'
CASES = [(family, classifier, MMPRETRAIN) for family in BACKBONE_CFGS] + [
    ('TNT', segmentor, MMTNT),
    ('PyramidTNT', detector, MMTNT),
    ('PCPVT', segmentor, MMTNT),
    ('SVT', detector, MMTNT),
]


@pytest.mark.parametrize(
    'family,build,constructor', CASES,
    ids=[f'{f}-{b.__name__}' for f, b, _ in CASES])
def test_layer_decay_groups_and_train_step(family, build, constructor):
    torch.manual_seed(0)
    scope, model_cfg = build(family)
    init_default_scope(scope)
    model = MODELS.build(model_cfg)
    optim_wrapper = build_optim_wrapper(
        model,
        dict(
            optimizer=dict(type='AdamW', lr=BASE_LR, weight_decay=BASE_WD),
            constructor=constructor,
            paramwise_cfg=PARAMWISE))

    modules = dict(model.named_modules())
    groups = {}
    for group in optim_wrapper.optimizer.param_groups:
        (param, ) = group['params']
        groups[id(param)] = group
    params = dict(model.named_parameters())
    assert len(groups) == len(params)
    depths = set()
    for name, param in params.items():
        group = groups[id(param)]
        depth, num_layers = expected_depth(family, name)
        depths.add(depth)
        assert group['layer_id'] == depth, name
        assert group['lr'] == pytest.approx(
            BASE_LR * DECAY**(num_layers - depth - 1)), name
        module = modules[name.rpartition('.')[0]]
        assert group['weight_decay'] == expected_decay(name, module), name
    assert depths == set(range(num_layers)), 'a depth holds no parameter'

    model.train()
    before = {n: p.detach().clone() for n, p in params.items()}
    log_vars = model.train_step(batch(scope), optim_wrapper)
    assert torch.isfinite(torch.stack(list(log_vars.values()))).all()
    changed = [n for n, p in params.items() if not torch.equal(p, before[n])]
    assert changed, 'the step changed no parameter'
