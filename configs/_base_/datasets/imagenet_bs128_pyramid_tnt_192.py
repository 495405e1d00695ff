# ImageNet-1k with the TNT (DeiT-style) training pipeline at 192x192, 128
# images per GPU, as PyramidTNT-Ti was trained. Evaluation as the
# official code: crop_pct 0.9, i.e. short edge resized to floor(192 / 0.9) =
# 213 (bicubic), centre crop 192. Data in mmpretrain's ImageNet layout under
# data/imagenet (docs/datasets.md).
_base_ = './imagenet_bs64_tnt_224.py'

# mean = std = 127.5 (TNT's 0.5), in BGR order for the fill values.
bgr_mean = [127.5, 127.5, 127.5]
bgr_std = [127.5, 127.5, 127.5]

train_pipeline = [
    dict(type='LoadImageFromFile'),
    # timm's train interpolation 'random' (the official default): bilinear
    # or bicubic, drawn per image
    dict(
        type='RandomChoice',
        transforms=[[
            dict(
                type='RandomResizedCrop',
                scale=192,
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

test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='ResizeEdge',
        scale=213,
        edge='short',
        backend='pillow',
        interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=192),
    dict(type='PackInputs'),
]

train_dataloader = dict(batch_size=128, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=128, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
