# RetinaNet with TNT-B (patch 16), 1x schedule on COCO: the recipe of
# retinanet_tnt-s-p16_fpn_1x_coco.py (PyramidTNT's 1x: AdamW lr 1e-4, weight
# decay 0.05, 12 epochs, steps at 8 and 11, drop-path 0.2, 16 images per
# iteration) with the TNT-B (patch 16) backbone (640 channels).
# No published result.
_base_ = './retinanet_tnt-s-p16_fpn_1x_coco.py'

model = dict(
    backbone=dict(arch='b'),
    neck=[
        dict(
            type='mmtnt.FeaturePyramid',
            in_channels=640,
            scales=(2, 1, 0.5),
            norm_cfg=dict(type='SyncBN', requires_grad=True),
            act_cfg=dict(type='GELU')),
        dict(
            type='FPN',
            in_channels=[640, 640, 640],
            out_channels=256,
            start_level=0,
            add_extra_convs='on_input',
            num_outs=5),
    ])
