# ImageNet-1k with the TNT (DeiT-style) training pipeline, 64 images per GPU.
# Data in mmpretrain's ImageNet layout under data/imagenet (docs/datasets.md).
# Mixup/CutMix act on batches and live in the model config
# (`model.train_cfg.augments`).
dataset_type = 'ImageNet'
data_root = 'data/imagenet'
data_preprocessor = dict(
    num_classes=1000,
    # TNT normalises with mean = std = 0.5 (in 0..255 units).
    mean=[127.5, 127.5, 127.5],
    std=[127.5, 127.5, 127.5],
    # convert image from BGR to RGB
    to_rgb=True,
)

bgr_mean = data_preprocessor['mean'][::-1]
bgr_std = data_preprocessor['std'][::-1]

train_pipeline = [
    dict(type='LoadImageFromFile'),
    # timm's train interpolation 'random' (the official default): bilinear
    # or bicubic, drawn per image
    dict(
        type='RandomChoice',
        transforms=[[
            dict(
                type='RandomResizedCrop',
                scale=224,
                backend='pillow',
                interpolation=interpolation)
        ] for interpolation in ('bilinear', 'bicubic')]),
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

# crop_pct 0.9: resize the short edge to 224 / 0.9 = 248, centre crop 224.
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
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='train',
        pipeline=train_pipeline),
    # repeated augmentation (DeiT): each image 3 times per epoch, spread
    # over the processes.
    sampler=dict(type='RepeatAugSampler', shuffle=True),
)

val_dataloader = dict(
    batch_size=64,
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
