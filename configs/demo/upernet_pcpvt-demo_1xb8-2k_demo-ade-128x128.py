# UperNet with a small Twins-PCPVT trained from scratch on the demo scenes
# (data/demo_scenes/ade, made by tools/dataset_converters/
# make_demo_scenes.py), sized to train within 15 minutes on 2 CPU cores.
_base_ = [
    '../_base_/datasets/demo-ade.py',
    'mmseg::_base_/default_runtime.py',
]

crop_size = (128, 128)
norm_cfg = dict(type='GN', num_groups=16, requires_grad=True)
backbone_channels = [32, 64, 128, 256]
# The scene behind the items covers 86% of the pixels: weighted down, it no
# longer dominates the first iterations, when a model trained from scratch
# would otherwise predict it everywhere.
class_weight = [0.2, 1.0, 1.0, 1.0, 1.0]
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255,
    size=crop_size)
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    # Four stages of one or two blocks, 32-256 channels (strides 4-32): 1.7M
    # parameters. Every stage ends with a LayerNorm, as dense heads want.
    backbone=dict(
        type='mmtnt.PCPVT',
        arch=dict(
            embed_dims=backbone_channels,
            depths=[1, 1, 2, 1],
            num_heads=[1, 2, 4, 8],
            mlp_ratios=[4, 4, 4, 4],
            sr_ratios=[8, 4, 2, 1]),
        out_indices=(0, 1, 2, 3),
        out_type='featmap',
        norm_after_stage=True),
    # Narrow heads with GroupNorm and no dropout, which learn faster here.
    decode_head=dict(
        type='UPerHead',
        in_channels=backbone_channels,
        in_index=[0, 1, 2, 3],
        pool_scales=(1, 2, 3, 6),
        channels=48,
        dropout_ratio=0.0,
        num_classes=5,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(
            type='CrossEntropyLoss',
            use_sigmoid=False,
            loss_weight=1.0,
            class_weight=class_weight)),
    auxiliary_head=dict(
        type='FCNHead',
        in_channels=backbone_channels[2],
        in_index=2,
        channels=32,
        num_convs=1,
        concat_input=False,
        dropout_ratio=0.0,
        num_classes=5,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(
            type='CrossEntropyLoss',
            use_sigmoid=False,
            loss_weight=0.4,
            class_weight=class_weight)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))

# schedule: AdamW, linear warm-up then polynomial decay
max_iters = 2000
train_cfg = dict(
    type='IterBasedTrainLoop', max_iters=max_iters, val_interval=1000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.01),
    paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=100),
    dict(
        type='PolyLR',
        power=1.0,
        eta_min=0.0,
        by_epoch=False,
        begin=100,
        end=max_iters),
]

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(
        type='CheckpointHook', by_epoch=False, interval=1000,
        max_keep_ckpts=1))
# a fixed seed, so that the demo's mIoU can be reproduced
randomness = dict(seed=0)
