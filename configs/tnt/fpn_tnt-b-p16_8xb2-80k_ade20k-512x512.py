# Semantic FPN with TNT-B (patch 16) on ADE20K, 512x512 crops, 80k iterations:
# the recipe of fpn_tnt-s-p16_8xb2-80k_ade20k-512x512.py (AdamW lr 1e-4, weight
# decay 1e-4, poly decay, 16 images per iteration, drop-path 0.2) with the
# TNT-B (patch 16) backbone (640 channels).
# No published result.
_base_ = './fpn_tnt-s-p16_8xb2-80k_ade20k-512x512.py'

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
            num_outs=4),
    ])
