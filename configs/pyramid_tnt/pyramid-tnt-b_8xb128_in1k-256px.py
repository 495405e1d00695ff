# PyramidTNT-B on ImageNet-1k with the published recipe (arXiv 2201.00978,
# official tnt_pytorch/readme.md): 256x256 input, 310 epochs (cosine to 300,
# then 10 at the minimum lr), AdamW lr 1e-3 at batch 1024 (8 GPUs x 128), wd
# 0.05, cosine with 20 warm-up epochs, Mixup 0.8 / CutMix 1.0, RandAugment
# m9-mstd0.5, repeated augmentation, random erasing 0.25, label smoothing 0.1,
# drop-path 0.1, EMA.
# Official: 157.0M parameters, 16.0G MACs, top-1 84.1.
_base_ = [
    '../_base_/models/pyramid-tnt-s.py',
    '../_base_/datasets/imagenet_bs128_pyramid_tnt_256.py',
    '../_base_/schedules/imagenet_bs1024_adamw_pyramid_tnt.py',
    '../_base_/default_runtime.py',
]

model = dict(
    backbone=dict(arch='b', img_size=256),
    head=dict(in_channels=1024))
