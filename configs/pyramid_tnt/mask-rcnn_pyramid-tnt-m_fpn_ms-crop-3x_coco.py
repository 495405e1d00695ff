# Mask R-CNN with PyramidTNT-M, 3x schedule with multi-scale training on COCO:
# the recipe of mask-rcnn_pyramid-tnt-s_fpn_ms-crop-3x_coco.py (the PyramidTNT
# paper's 3x: AdamW lr 1e-4, weight decay 0.05, 36 epochs, steps at 27 and 33;
# multi-scale training with crops, drop-path 0.2, 16 images per iteration) with
# the PyramidTNT-M backbone (position terms stored at 256x256).
# No published result.
_base_ = './mask-rcnn_pyramid-tnt-s_fpn_ms-crop-3x_coco.py'

model = dict(
    backbone=dict(arch='m', img_size=256),
    neck=dict(in_channels=[192, 384, 768, 768]))
