# A two-block TNT under an FCN head segmenting 32x32 images into 2 classes,
# for the tests of tools/ with mmseg as the default scope. Data: mmseg's
# BaseSegDataset layout, `img/*.png` and `ann/*.png` (label maps) under
# `data_root`; the tests write them and point `data_root` at them.
_base_ = './tnt_tiny_base.py'
default_scope = 'mmseg'

data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[127.5] * 3,
    std=[127.5] * 3,
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255,
    size=(32, 32))
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone=dict(out_indices=(1, ), out_type='featmap'),
    decode_head=dict(
        type='FCNHead',
        in_channels=32,
        in_index=0,
        channels=16,
        num_convs=1,
        concat_input=False,
        num_classes=2,
        norm_cfg=dict(type='BN'),
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', loss_weight=1.0)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))

data_root = 'data/mmtnt_tiny_seg'
pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs')
]
dataset = dict(
    type='BaseSegDataset',
    data_root=data_root,
    data_prefix=dict(img_path='img', seg_map_path='ann'),
    img_suffix='.png',
    seg_map_suffix='.png',
    metainfo=dict(
        classes=('background', 'foreground'),
        palette=[[0, 0, 0], [255, 255, 255]]),
    pipeline=pipeline)
train_dataloader = dict(
    batch_size=2,
    num_workers=0,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dataset)
val_dataloader = dict(
    batch_size=1,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dataset)
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator

optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.01, momentum=0.9))
train_cfg = dict(type='IterBasedTrainLoop', max_iters=2, val_interval=2)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')

default_hooks = dict(
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2),
    visualization=dict(type='SegVisualizationHook', interval=1))
visualizer = dict(
    type='SegLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')])
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)
