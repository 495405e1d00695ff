# Mask R-CNN with PyramidTNT-Ti, 1x schedule on COCO: the recipe of
# mask-rcnn_pyramid-tnt-s_fpn_1x_coco.py (the PyramidTNT paper's 1x: AdamW lr
# 1e-4, weight decay 0.05, 12 epochs, steps at 8 and 11, drop-path 0.2, 16
# images per iteration) with the PyramidTNT-Ti backbone (position terms stored
# at 192x192).
# No published result.
_base_ = './mask-rcnn_pyramid-tnt-s_fpn_1x_coco.py'

model = dict(
    backbone=dict(arch='ti', img_size=192),
    neck=dict(in_channels=[80, 160, 320, 320]))
