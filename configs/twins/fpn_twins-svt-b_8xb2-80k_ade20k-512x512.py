# Semantic FPN with Twins-SVT-B on ADE20K, 512x512 crops, 80k iterations: the
# recipe of fpn_twins-svt-s_8xb2-80k_ade20k-512x512.py (AdamW lr 1e-4, weight
# decay 1e-4, poly decay, 16 images per iteration) with the Twins-SVT-B
# backbone and drop-path 0.2 (as mmseg's config).
# mIoU, mmseg 1.x reproduction (8 GPUs x 4 images, constant LR): 46.77.
_base_ = './fpn_twins-svt-s_8xb2-80k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='b'),
    neck=dict(in_channels=[96, 192, 384, 768]))
