# ImageNet-1k with the Twins (DeiT-style) training pipeline, 128 images per
# GPU. Data in mmpretrain's ImageNet layout under data/imagenet
# (docs/datasets.md). Mixup/CutMix act on batches and live in the model
# config (`model.train_cfg.augments`).
#
# Differences from the TNT pipeline (imagenet_bs64_tnt_224.py): ImageNet
# mean/std instead of 0.5/0.5, no repeated augmentation (the official Twins
# runs leave it off), and the DeiT test resize (short edge 256, crop 224).
dataset_type = 'ImageNet'
data_root = 'data/imagenet'
data_preprocessor = dict(
    num_classes=1000,
    # RGB mean/std of ImageNet (timm's IMAGENET_DEFAULT_*), 0..255 units
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    # convert image from BGR to RGB
    to_rgb=True,
)

bgr_mean = data_preprocessor['mean'][::-1]
bgr_std = data_preprocessor['std'][::-1]

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='RandomResizedCrop',
        scale=224,
        backend='pillow',
        interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    # timm's rand-m9-mstd0.5-inc1
    dict(
        type='RandAugment',
        policies='timm_increasing',
        num_policies=2,
        total_level=10,
        magnitude_level=9,
        magnitude_std=0.5,
        hparams=dict(
            pad_val=[round(x) for x in bgr_mean], interpolation='bicubic')),
    # timm's reprob 0.25, remode pixel
    dict(
        type='RandomErasing',
        erase_prob=0.25,
        mode='rand',
        min_area_ratio=0.02,
        max_area_ratio=1 / 3,
        fill_color=bgr_mean,
        fill_std=bgr_std),
    dict(type='PackInputs'),
]

# DeiT's evaluation: resize the short edge to 256 (224 / 0.875), centre
# crop 224.
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='ResizeEdge',
        scale=256,
        edge='short',
        backend='pillow',
        interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='train',
        pipeline=train_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True),
)

val_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='val',
        pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, 5))

# ImageNet's test split has no labels: test on val.
test_dataloader = val_dataloader
test_evaluator = val_evaluator
