# UperNet with Twins-SVT-B on ADE20K, 512x512 crops, 160k iterations: the
# recipe of upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py (AdamW lr 6e-5,
# weight decay 0.01, 1500-iteration warm-up, linear decay, 16 images per
# iteration) with the Twins-SVT-B backbone and drop-path 0.2 (as mmseg's
# config).
# mIoU single/multi-scale, official Twins README: 47.4/48.9; mmseg 1.x
# reproduction: 48.04.
_base_ = './upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='b'),
    decode_head=dict(in_channels=[96, 192, 384, 768]),
    auxiliary_head=dict(in_channels=384))
