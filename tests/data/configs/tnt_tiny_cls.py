# A two-block TNT classifying 32x32 images into 2 classes, for the tests of
# tools/. Data: mmpretrain's CustomDataset layout (one folder per class) in
# `train` and `val` under `data_root`; the tests write the images and point
# `data_root` at them, and leave it as is to test the missing-dataset error.
_base_ = './tnt_tiny_base.py'
default_scope = 'mmpretrain'

model = dict(
    type='ImageClassifier',
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=2,
        in_channels=32,
        loss=dict(type='CrossEntropyLoss'),
        topk=(1, )))

data_preprocessor = dict(
    num_classes=2, mean=[127.5] * 3, std=[127.5] * 3, to_rgb=True)

data_root = 'data/mmtnt_tiny_cls'
# No random transform: a resumed run must redo exactly what was lost.
pipeline = [dict(type='LoadImageFromFile'), dict(type='PackInputs')]
dataset = dict(type='CustomDataset', data_root=data_root, pipeline=pipeline)
train_dataloader = dict(
    batch_size=4,
    num_workers=0,
    dataset=dict(dataset, data_prefix='train'),
    sampler=dict(type='DefaultSampler', shuffle=True))
val_dataloader = dict(
    batch_size=4,
    num_workers=0,
    dataset=dict(dataset, data_prefix='val'),
    sampler=dict(type='DefaultSampler', shuffle=False))
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_dataloader = val_dataloader
test_evaluator = val_evaluator

optim_wrapper = dict(optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05))
# Iteration-based warm-up then cosine decay: resuming must restore both.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=4),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=4, end=16)
]
train_cfg = dict(by_epoch=True, max_epochs=4, val_interval=2)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=4)

default_hooks = dict(
    checkpoint=dict(type='CheckpointHook', interval=1, save_best='auto'),
    visualization=dict(type='VisualizationHook', enable=False))
visualizer = dict(
    type='UniversalVisualizer', vis_backends=[dict(type='LocalVisBackend')])
randomness = dict(seed=0, deterministic=True)
