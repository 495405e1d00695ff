# Twins-SVT-S on ImageNet-1k with the published Twins (DeiT-style)
# recipe (arXiv 2104.13840): 300 epochs, AdamW lr 5e-4 * batch / 512 = 1e-3
# at batch 1024 (8 GPUs x 128), wd 0.05 (none on norms, biases and position
# encodings), cosine with 5 warm-up epochs, gradient clipping 5, label
# smoothing 0.1, Mixup 0.8 / CutMix 1.0, RandAugment m9-mstd0.5, random
# erasing 0.25, drop-path 0.2. Official top-1: 81.7, 24.0M parameters.
# The released log (logs/svt_s.txt) peaks at lr 2.0e-3: the same rule at a
# batch of 2048 (16 GPUs x 128). To rerun it, train on 16 GPUs with
# `--auto-scale-lr`, which sets lr 2e-3 for 2048 images per iteration.
_base_ = [
    '../_base_/models/twins-svt-s.py',
    '../_base_/datasets/imagenet_bs128_twins_224.py',
    '../_base_/schedules/imagenet_bs1024_adamw_twins.py',
    '../_base_/default_runtime.py',
]
