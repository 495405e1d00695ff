# TNT-S fine-tuned on your own images, one sub-folder per class
# (docs/custom_data.md). Data (placeholder paths under data/custom/cls):
#
#   data/custom/cls/train/<class name>/<any name>.jpg|.png|...
#   data/custom/cls/val/<class name>/...
#
# mmpretrain's CustomDataset numbers the classes by the sorted sub-folder
# names; there must be `num_classes` of them. The run starts from ImageNet
# weights converted once with
#   python tools/model_converters/tnt2mmtnt.py tnt_s_81.5.pth.tar \
#       checkpoints/tnt-s-p16_official_in1k.pth --allow-pickle
# (`load_from` below; its 1000-class head does not fit and is skipped).
# The schedule is a starting point for a few thousand images on one GPU,
# not a tuned recipe.
_base_ = [
    '../_base_/models/tnt-s-p16.py',
    '../_base_/schedules/imagenet_bs1024_adamw_tnt.py',
    '../_base_/default_runtime.py',
]

num_classes = 3
data_root = 'data/custom/cls'

model = dict(
    # frozen_stages=k keeps the embeddings and the first k of the 12 blocks
    # as loaded (0: the embeddings only), for very small data sets.
    backbone=dict(frozen_stages=-1),
    head=dict(num_classes=num_classes),
    # No Mixup/CutMix: the ImageNet recipe's batch augments are left out.
    train_cfg=None)

# TNT's normalisation (mean = std = 0.5), as its ImageNet weights were
# trained (_base_/datasets/imagenet_bs64_tnt_224.py).
data_preprocessor = dict(
    num_classes=num_classes,
    mean=[127.5, 127.5, 127.5],
    std=[127.5, 127.5, 127.5],
    to_rgb=True)

train_pipeline = [
    # color_type='color' (the default) decodes every file to 3 channels:
    # grayscale images become 3 equal channels, as the weights expect.
    dict(type='LoadImageFromFile'),
    dict(
        type='RandomResizedCrop',
        scale=224,
        backend='pillow',
        interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='ResizeEdge',
        scale=248,
        edge='short',
        backend='pillow',
        interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=32,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type='CustomDataset',
        data_root=data_root,
        data_prefix='train',
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=32,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='CustomDataset',
        data_root=data_root,
        data_prefix='val',
        pipeline=test_pipeline))
# top-5 accuracy needs 5 classes or more
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_dataloader = val_dataloader
test_evaluator = val_evaluator

# Fine-tuning: AdamW at 5e-5 for 32 images per iteration (the ImageNet
# recipe trains from scratch at 1e-3 for 1024), 1 warm-up epoch, cosine
# decay over 50 epochs.
max_epochs = 50
optim_wrapper = dict(optimizer=dict(lr=5e-5))
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-2,
        by_epoch=True,
        begin=0,
        end=1,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        T_max=max_epochs - 1,
        eta_min=1e-6,
        by_epoch=True,
        begin=1,
        end=max_epochs,
        convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=1)
# `--auto-scale-lr` rescales the lr to the total batch actually used.
auto_scale_lr = dict(base_batch_size=32)

default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(max_keep_ckpts=1, save_best='auto'))

load_from = 'checkpoints/tnt-s-p16_official_in1k.pth'
