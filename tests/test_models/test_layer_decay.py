"""Layer-wise learning-rate decay: every family's ``get_layer_depth`` in
mmpretrain's constructor (classifiers) and in
``mmtnt.LayerDecayOptimWrapperConstructor`` (detectors and segmentors).

The expected depths and learning-rate scales are written out by hand for
the tiny archs (:data:`LAYERS`), as mmpretrain's ViT and Swin count them:
the embeddings at 0, the blocks in order, what a stage holds outside its
blocks with the block before it, Twins' position encoding with the block it
follows, final norms, necks and heads at the last depth; a parameter at
depth ``d`` of ``n`` gets ``DECAY ** (n - d - 1)`` of the learning rate.
"""
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
#: Family -> {parameter name prefix: (layer id, learning-rate scale)}, a
#: parameter taking its longest prefix; ``'*'``: what is not in the
#: backbone (necks and heads).
LAYERS = {
    # 2 blocks: 4 depths
    'TNT': {
        'backbone.word_embed': (0, 1 / 8),
        'backbone.word_pos': (0, 1 / 8),
        'backbone.sentence_proj': (0, 1 / 8),
        'backbone.cls_token': (0, 1 / 8),
        'backbone.sentence_pos': (0, 1 / 8),
        'backbone.blocks.0': (1, 1 / 4),
        'backbone.blocks.1': (2, 1 / 2),
        'backbone.norm': (3, 1.),
        '*': (3, 1.),
    },
    # 1 + 1 + 1 + 1 blocks: 6 depths
    'PyramidTNT': {
        'backbone.stem': (0, 1 / 32),
        'backbone.word_pos': (0, 1 / 32),
        'backbone.sentence_pos': (0, 1 / 32),
        'backbone.stages.0.relative_pos': (0, 1 / 32),
        'backbone.stages.0.blocks.0': (1, 1 / 16),
        'backbone.stages.1.word_merge': (1, 1 / 16),
        'backbone.stages.1.sentence_merge': (1, 1 / 16),
        'backbone.stages.1.relative_pos': (1, 1 / 16),
        'backbone.stages.1.blocks.0': (2, 1 / 8),
        'backbone.stages.2.word_merge': (2, 1 / 8),
        'backbone.stages.2.sentence_merge': (2, 1 / 8),
        'backbone.stages.2.relative_pos': (2, 1 / 8),
        'backbone.stages.2.blocks.0': (3, 1 / 4),
        'backbone.stages.3.word_merge': (3, 1 / 4),
        'backbone.stages.3.sentence_merge': (3, 1 / 4),
        'backbone.stages.3.relative_pos': (3, 1 / 4),
        'backbone.stages.3.blocks.0': (4, 1 / 2),
        'backbone.norm': (5, 1.),
        '*': (5, 1.),
    },
    # 1 + 1 + 1 + 1 blocks: 6 depths; no norm after stages 0-2
    'PCPVT': {
        'backbone.stages.0.patch_embed': (0, 1 / 32),
        'backbone.stages.0.blocks.0': (1, 1 / 16),
        'backbone.stages.0.pos_conv': (1, 1 / 16),
        'backbone.stages.1.patch_embed': (1, 1 / 16),
        'backbone.stages.1.blocks.0': (2, 1 / 8),
        'backbone.stages.1.pos_conv': (2, 1 / 8),
        'backbone.stages.2.patch_embed': (2, 1 / 8),
        'backbone.stages.2.blocks.0': (3, 1 / 4),
        'backbone.stages.2.pos_conv': (3, 1 / 4),
        'backbone.stages.3.patch_embed': (3, 1 / 4),
        'backbone.stages.3.blocks.0': (4, 1 / 2),
        'backbone.stages.3.pos_conv': (4, 1 / 2),
        'backbone.stages.3.norm': (5, 1.),
        '*': (5, 1.),
    },
    # 2 + 2 + 1 + 1 blocks: 8 depths
    'SVT': {
        'backbone.stages.0.patch_embed': (0, 1 / 128),
        'backbone.stages.0.blocks.0': (1, 1 / 64),
        'backbone.stages.0.pos_conv': (1, 1 / 64),
        'backbone.stages.0.blocks.1': (2, 1 / 32),
        'backbone.stages.1.patch_embed': (2, 1 / 32),
        'backbone.stages.1.blocks.0': (3, 1 / 16),
        'backbone.stages.1.pos_conv': (3, 1 / 16),
        'backbone.stages.1.blocks.1': (4, 1 / 8),
        'backbone.stages.2.patch_embed': (4, 1 / 8),
        'backbone.stages.2.blocks.0': (5, 1 / 4),
        'backbone.stages.2.pos_conv': (5, 1 / 4),
        'backbone.stages.3.patch_embed': (5, 1 / 4),
        'backbone.stages.3.blocks.0': (6, 1 / 2),
        'backbone.stages.3.pos_conv': (6, 1 / 2),
        'backbone.stages.3.norm': (7, 1.),
        '*': (7, 1.),
    },
}


def expected_layer(family, name):
    """(layer id, learning-rate scale) of parameter ``name`` in
    :data:`LAYERS`, and the prefix that gives it."""
    table = LAYERS[family]
    prefixes = [p for p in table if name == p or name.startswith(p + '.')]
    if not name.startswith('backbone.'):
        prefixes = ['*']
    assert prefixes, f'{name} is not in the table'
    prefix = max(prefixes, key=len)
    return table[prefix], prefix


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
    used = set()
    for name, param in params.items():
        group = groups[id(param)]
        (layer_id, lr_scale), prefix = expected_layer(family, name)
        used.add(prefix)
        assert group['layer_id'] == layer_id, name
        assert group['lr'] == pytest.approx(BASE_LR * lr_scale), name
        module = modules[name.rpartition('.')[0]]
        assert group['weight_decay'] == expected_decay(name, module), name
    assert used == LAYERS[family].keys(), 'a prefix holds no parameter'

    model.train()
    before = {n: p.detach().clone() for n, p in params.items()}
    log_vars = model.train_step(batch(scope), optim_wrapper)
    assert torch.isfinite(torch.stack(list(log_vars.values()))).all()
    changed = [n for n, p in params.items() if not torch.equal(p, before[n])]
    assert changed, 'the step changed no parameter'
