# Semantic FPN with PyramidTNT-B on ADE20K, 512x512 crops, 80k iterations: the
# recipe of fpn_pyramid-tnt-s_8xb2-80k_ade20k-512x512.py (AdamW lr 1e-4, weight
# decay 1e-4, poly decay, 16 images per iteration, drop-path 0.2) with the
# PyramidTNT-B backbone (position terms stored at 256x256).
# No published result.
_base_ = './fpn_pyramid-tnt-s_8xb2-80k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='b', img_size=256),
    neck=dict(in_channels=[256, 512, 1024, 1024]))
