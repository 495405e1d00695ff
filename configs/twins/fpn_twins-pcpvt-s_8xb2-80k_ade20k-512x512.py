# Semantic FPN with Twins-PCPVT-S on ADE20K, 512x512 crops, 80k iterations: the
# PVT recipe that Twins follows: AdamW lr 1e-4, weight decay 1e-4, poly decay
# (power 0.9) to 1e-6, 16 images per iteration (8 GPUs x 2), drop-path 0.2.
# mIoU, mmseg 1.x reproduction (8 GPUs x 4 images, constant LR): 43.26.
_base_ = [
    '../_base_/models/fpn_twins-pcpvt-s.py',
    '../_base_/datasets/ade20k_bs2_512x512.py',
    '../_base_/schedules/ade20k_bs16_adamw_80k.py',
    'mmseg::_base_/default_runtime.py',
]
