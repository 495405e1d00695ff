# The embedded demo: a small TNT trained from scratch on Fashion-MNIST,
# sized to finish within minutes on 2 CPU cores (`make demo`).
# Data: `python tools/dataset_converters/prepare_fashion_mnist.py`
# (docs/datasets.md); nothing is downloaded.
_base_ = ['../_base_/default_runtime.py']

# 28x28 grey images, resized to 32x32, cut into 4x4 = 16 sentences of 8x8
# pixels; each sentence holds (8 / 2)^2 = 16 words.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmtnt.TNT',
        arch=dict(
            embed_dims_outer=64,
            embed_dims_inner=8,
            num_layers=4,
            num_heads_outer=4,
            num_heads_inner=2),
        img_size=32,
        patch_size=8,
        first_stride=2,
        in_channels=1,
        # PyTorch's default initialisation instead of TNT's truncated normal
        # (std 0.02): this small model then learns faster in a short run
        # (82.7% instead of 79.2% top-1 after one epoch).
        init_cfg=None),
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=10,
        in_channels=64,
        loss=dict(type='CrossEntropyLoss', loss_weight=1.0),
        topk=(1, )),
)

# dataset settings
dataset_type = 'FashionMNIST'
data_root = 'data/fashion_mnist'
data_preprocessor = dict(
    num_classes=10,
    # Fashion-MNIST pixel mean and std (0.286, 0.353 in 0..1 units)
    mean=[72.94],
    std=[90.02],
)

train_pipeline = [
    dict(type='Resize', scale=32),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [dict(type='Resize', scale=32), dict(type='PackInputs')]

train_dataloader = dict(
    batch_size=128,
    num_workers=1,
    persistent_workers=True,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='train',
        download=False,
        pipeline=train_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True),
)
val_dataloader = dict(
    batch_size=500,
    num_workers=1,
    persistent_workers=True,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='test',
        test_mode=True,
        download=False,
        pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, ))

# the full 10,000-image test set
test_dataloader = val_dataloader
test_evaluator = val_evaluator

# schedule settings
max_epochs = 4
warmup_epochs = 0.2
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=3e-3, weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={
            'cls_token': dict(decay_mult=0.0),
            'sentence_pos': dict(decay_mult=0.0),
            'word_pos': dict(decay_mult=0.0),
        }),
)
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-2,
        by_epoch=True,
        begin=0,
        end=warmup_epochs,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        T_max=max_epochs - warmup_epochs,
        eta_min=1e-5,
        by_epoch=True,
        begin=warmup_epochs,
        end=max_epochs,
        convert_to_iter_based=True),
]

# validate once, after the last epoch (it takes a while on a CPU)
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=max_epochs)
val_cfg = dict()
test_cfg = dict()

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50),
    checkpoint=dict(
        type='CheckpointHook', interval=1, max_keep_ckpts=1, save_best=None),
)

# a fixed seed, so that the demo's accuracy can be reproduced
randomness = dict(seed=0, deterministic=False)
