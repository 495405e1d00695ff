# Semantic FPN with Twins-SVT-L on ADE20K, 512x512 crops, 80k iterations: the
# recipe of fpn_twins-svt-s_8xb2-80k_ade20k-512x512.py (AdamW lr 1e-4, weight
# decay 1e-4, poly decay, 16 images per iteration) with the Twins-SVT-L
# backbone and drop-path 0.3 (as mmseg's config).
# mIoU, mmseg 1.x reproduction (8 GPUs x 4 images, constant LR): 46.55.
_base_ = './fpn_twins-svt-s_8xb2-80k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='l', drop_path_rate=0.3),
    neck=dict(in_channels=[128, 256, 512, 1024]))
