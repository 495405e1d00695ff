# Twins-SVT-L on ImageNet-1k with the published Twins (DeiT-style)
# recipe (arXiv 2104.13840): 300 epochs, AdamW lr 5e-4 * batch / 512 = 1e-3
# at batch 1024 (16 GPUs x 64), wd 0.05 (none on norms, biases and position
# encodings), cosine with 20 warm-up epochs, gradient clipping 5, label
# smoothing 0.1, Mixup 0.8 / CutMix 1.0, RandAugment m9-mstd0.5, random
# erasing 0.25, drop-path 0.5. Official top-1: 83.7, 99.2M parameters.
_base_ = [
    '../_base_/models/twins-svt-s.py',
    '../_base_/datasets/imagenet_bs128_twins_224.py',
    '../_base_/schedules/imagenet_bs1024_adamw_twins.py',
    '../_base_/default_runtime.py',
]

model = dict(
    backbone=dict(arch='l', drop_path_rate=0.5),
    head=dict(in_channels=1024))

# The released log (logs/svt_l.txt) warms up for 20 epochs, not 5.
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-3,
        by_epoch=True,
        begin=0,
        end=20,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        T_max=280,
        eta_min=1e-5,
        by_epoch=True,
        begin=20,
        end=300,
        convert_to_iter_based=True),
]

train_dataloader = dict(batch_size=64)
val_dataloader = dict(batch_size=64)
test_dataloader = dict(batch_size=64)
