# RetinaNet with Twins-SVT-L and FPN, 1x schedule on COCO: the recipe of
# retinanet_twins-svt-s_fpn_1x_coco.py (the official Twins "PVT setting": AdamW
# lr 1e-4, weight decay 1e-4, 12 epochs, steps at 8 and 11, drop-path 0.2, 16
# images per iteration) with the Twins-SVT-L backbone.
# Twins paper, COCO val2017 (as commonly cited): 45.7 box AP.
_base_ = './retinanet_twins-svt-s_fpn_1x_coco.py'

model = dict(
    backbone=dict(arch='l'),
    neck=dict(in_channels=[128, 256, 512, 1024]))
