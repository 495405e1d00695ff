# Mask R-CNN with Twins-SVT-B and FPN, 3x schedule with multi-scale training on
# COCO: the recipe of mask-rcnn_twins-svt-s_fpn_ms-crop-3x_coco.py (the
# official Twins "Swin setting": AdamW lr 1e-4, weight decay 0.05, 36 epochs,
# steps at 27 and 33, multi-scale training with crops, drop-path 0.2, 16 images
# per iteration) with the Twins-SVT-B backbone.
_base_ = './mask-rcnn_twins-svt-s_fpn_ms-crop-3x_coco.py'

model = dict(
    backbone=dict(arch='b'),
    neck=dict(in_channels=[96, 192, 384, 768]))
