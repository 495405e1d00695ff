# Semantic FPN with PyramidTNT-S (stage maps upsampled by 2) on ADE20K, 512x512
# crops, 80k iterations. No PyramidTNT segmentor was published: the recipe is
# the Twins Semantic FPN (PVT) one (the only published segmentation recipe
# among mmtnt's families): AdamW lr 1e-4, weight decay 1e-4, poly decay (power
# 0.9) to 1e-6, 16 images per iteration (8 GPUs x 2), drop-path 0.2.
# No published result.
_base_ = [
    '../_base_/models/fpn_pyramid-tnt-s.py',
    '../_base_/datasets/ade20k_bs2_512x512.py',
    '../_base_/schedules/ade20k_bs16_adamw_80k.py',
    'mmseg::_base_/default_runtime.py',
]
