# TNT-S on ImageNet-1k with the published TNT recipe (arXiv 2103.00112): 310
# epochs (cosine to 300, 10 cool-down epochs), AdamW lr 1e-3 at batch 1024 (16
# GPUs x 64), wd 0.05, cosine with 5 warm-up epochs, Mixup 0.8 / CutMix 1.0,
# RandAugment m9-mstd0.5, repeated augmentation, random erasing 0.25, drop-path
# 0.1, EMA.
# Paper top-1: 81.5 (official TNT-S).
_base_ = [
    '../_base_/models/tnt-s-p16.py',
    '../_base_/datasets/imagenet_bs64_tnt_224.py',
    '../_base_/schedules/imagenet_bs1024_adamw_tnt.py',
    '../_base_/default_runtime.py',
]

# Exponential moving average of the weights (timm's model_ema_decay
# 0.99996); validation and the saved checkpoints use the averaged weights.
custom_hooks = [dict(type='EMAHook', momentum=4e-5, priority='ABOVE_NORMAL')]
