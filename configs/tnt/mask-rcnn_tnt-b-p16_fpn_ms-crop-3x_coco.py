# Mask R-CNN with TNT-B (patch 16), 3x schedule with multi-scale training on
# COCO: the recipe of mask-rcnn_tnt-s-p16_fpn_ms-crop-3x_coco.py (AdamW lr
# 1e-4, weight decay 0.05, 36 epochs, steps at 27 and 33, multi-scale training
# with crops, drop-path 0.2, 16 images per iteration) with the TNT-B (patch 16)
# backbone (640 channels).
# No published result.
_base_ = './mask-rcnn_tnt-s-p16_fpn_ms-crop-3x_coco.py'

model = dict(
    backbone=dict(arch='b'),
    neck=[
        dict(
            type='mmtnt.FeaturePyramid',
            in_channels=640,
            scales=(4, 2, 1, 0.5),
            norm_cfg=dict(type='SyncBN', requires_grad=True),
            act_cfg=dict(type='GELU')),
        dict(
            type='FPN',
            in_channels=[640, 640, 640, 640],
            out_channels=256,
            num_outs=5),
    ])
