# RetinaNet with Twins-PCPVT-B and FPN, 1x schedule on COCO: the recipe of
# retinanet_twins-pcpvt-s_fpn_1x_coco.py (the official Twins "PVT setting":
# AdamW lr 1e-4, weight decay 1e-4, 12 epochs, steps at 8 and 11, drop-path
# 0.2, 16 images per iteration) with the Twins-PCPVT-B backbone.
# Twins paper, COCO val2017 (as commonly cited): 44.3 box AP.
_base_ = './retinanet_twins-pcpvt-s_fpn_1x_coco.py'

model = dict(
    backbone=dict(arch='b'))
