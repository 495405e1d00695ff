# Semantic FPN with PyramidTNT-Ti on ADE20K, 512x512 crops, 80k iterations: the
# recipe of fpn_pyramid-tnt-s_8xb2-80k_ade20k-512x512.py (AdamW lr 1e-4, weight
# decay 1e-4, poly decay, 16 images per iteration, drop-path 0.2) with the
# PyramidTNT-Ti backbone (position terms stored at 192x192).
# No published result.
_base_ = './fpn_pyramid-tnt-s_8xb2-80k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='ti', img_size=192),
    neck=dict(in_channels=[80, 160, 320, 320]))
