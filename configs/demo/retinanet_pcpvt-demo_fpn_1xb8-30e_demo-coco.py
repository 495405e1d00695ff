# RetinaNet with a small Twins-PCPVT trained from scratch on the demo scenes
# (data/demo_scenes/coco, made by tools/dataset_converters/
# make_demo_scenes.py), sized to train within 15 minutes on 2 CPU cores.
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    '../_base_/datasets/demo-coco_detection.py',
    'mmdet::_base_/default_runtime.py',
]

# Four stages of one or two blocks, 32-256 channels (strides 4-32): 1.7M
# parameters. Every stage ends with a LayerNorm, as dense heads want.
backbone_channels = [32, 64, 128, 256]
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmtnt.PCPVT',
        arch=dict(
            embed_dims=backbone_channels,
            depths=[1, 1, 2, 1],
            num_heads=[1, 2, 4, 8],
            mlp_ratios=[4, 4, 4, 4],
            sr_ratios=[8, 4, 2, 1]),
        out_indices=(1, 2, 3),
        out_type='featmap',
        norm_after_stage=True),
    # The items are 10-56 pixels: strides 8, 16 and 32 suffice.
    neck=dict(
        in_channels=backbone_channels[1:],
        out_channels=64,
        start_level=0,
        add_extra_convs=False,
        num_outs=3,
        norm_cfg=dict(type='GN', num_groups=16)),
    bbox_head=dict(
        num_classes=4,
        in_channels=64,
        feat_channels=64,
        stacked_convs=2,
        norm_cfg=dict(type='GN', num_groups=16),
        # anchors of 16-25 px at stride 8, 32-51 at 16, 64-101 at 32
        anchor_generator=dict(octave_base_scale=2, strides=[8, 16, 32])),
    test_cfg=dict(nms_pre=300, max_per_img=50))

# schedule: AdamW, linear warm-up then cosine decay, by iteration
max_epochs = 30
train_cfg = dict(
    type='EpochBasedTrainLoop', max_epochs=max_epochs, val_interval=10)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
    paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0),
    clip_grad=dict(max_norm=10, norm_type=2))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=100),
    dict(
        type='CosineAnnealingLR',
        T_max=max_epochs,
        eta_min=1e-5,
        by_epoch=True,
        begin=0,
        end=max_epochs,
        convert_to_iter_based=True),
]

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=20),
    checkpoint=dict(type='CheckpointHook', interval=10, max_keep_ckpts=1))
# a fixed seed, so that the demo's AP can be reproduced
randomness = dict(seed=0)
auto_scale_lr = dict(enable=False, base_batch_size=8)
