# UperNet with Twins-SVT-S fine-tuned on your own label maps
# (docs/custom_data.md): the ADE20K recipe
# (configs/twins/upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py) with your
# classes, 4 crops of 512x512 per iteration on one GPU and 8k iterations.
# Data (placeholder paths under data/custom/seg):
#
#   data/custom/seg/images/train/0001.jpg ...
#   data/custom/seg/images/val/...
#   data/custom/seg/labels/train/0001_mask.png ...   # one per image
#   data/custom/seg/labels/val/...
#
# A label map is a one-channel PNG (grey or palette) of class indices:
# 0 .. num_classes - 1 in the order of `classes`, 255 where no class is
# known (ignored by the loss and the metric). Its name is the image's with
# `img_suffix` replaced by `seg_map_suffix`. The backbone starts from
# ImageNet weights converted once with
#   python tools/model_converters/twins2mmtnt.py alt_gvt_small.pth \
#       checkpoints/twins-svt-small_official_in1k.pth --allow-pickle
# The schedule is a starting point, not a tuned recipe.
_base_ = '../twins/upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py'

classes = ('background', 'road', 'car', 'person')
palette = [[0, 0, 0], [128, 64, 128], [0, 0, 142], [220, 20, 60]]
data_root = 'data/custom/seg'
metainfo = dict(classes=classes, palette=palette)
crop_size = (512, 512)

model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/twins-svt-small_official_in1k.pth',
            prefix='backbone.')),
    decode_head=dict(num_classes=len(classes)),
    auxiliary_head=dict(num_classes=len(classes)))

# ADE20K's pipelines without their `reduce_zero_label=True`: LoadAnnotations
# follows the dataset's setting (mmseg stops when the two disagree).
# Resizing to 2048x512 (0.5-2x) suits images of about 512 pixels; change
# `scale` to the size of yours.
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(
        type='RandomResize',
        scale=(2048, 512),
        ratio_range=(0.5, 2.0),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 512), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
custom_dataset = dict(
    type='BaseSegDataset',
    data_root=data_root,
    metainfo=metainfo,
    img_suffix='.jpg',
    seg_map_suffix='_mask.png',
    # True for label maps whose 0 means "unlabelled" (ADE20K's convention):
    # 0 becomes 255 and every other index drops by one.
    reduce_zero_label=False)
train_dataloader = dict(
    batch_size=4,
    dataset=dict(
        **custom_dataset,
        data_prefix=dict(
            img_path='images/train', seg_map_path='labels/train'),
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(
        **custom_dataset,
        data_prefix=dict(img_path='images/val', seg_map_path='labels/val'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader

# The ADE20K recipe's AdamW lr 6e-5 (set for 16 crops per iteration;
# `--auto-scale-lr` scales it to the batch used), 200 iterations of warm-up,
# then linear decay to 0 at 8k iterations.
max_iters = 8000
train_cfg = dict(max_iters=max_iters, val_interval=800)
param_scheduler = [
    dict(
        type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0,
        end=200),
    dict(
        type='PolyLR',
        eta_min=0.0,
        power=1.0,
        by_epoch=False,
        begin=200,
        end=max_iters)
]
default_hooks = dict(
    checkpoint=dict(interval=800, max_keep_ckpts=1, save_best='mIoU'))
