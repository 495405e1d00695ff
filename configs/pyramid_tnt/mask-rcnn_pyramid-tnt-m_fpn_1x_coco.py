# Mask R-CNN with PyramidTNT-M, 1x schedule on COCO: the recipe of
# mask-rcnn_pyramid-tnt-s_fpn_1x_coco.py (the PyramidTNT paper's 1x: AdamW lr
# 1e-4, weight decay 0.05, 12 epochs, steps at 8 and 11, drop-path 0.2, 16
# images per iteration) with the PyramidTNT-M backbone (position terms stored
# at 256x256).
# No published result.
_base_ = './mask-rcnn_pyramid-tnt-s_fpn_1x_coco.py'

model = dict(
    backbone=dict(arch='m', img_size=256),
    neck=dict(in_channels=[192, 384, 768, 768]))
