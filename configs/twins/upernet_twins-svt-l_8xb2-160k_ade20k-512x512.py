# UperNet with Twins-SVT-L on ADE20K, 512x512 crops, 160k iterations: the
# recipe of upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py (AdamW lr 6e-5,
# weight decay 0.01, 1500-iteration warm-up, linear decay, 16 images per
# iteration) with the Twins-SVT-L backbone and drop-path 0.3 (as mmseg's
# config).
# mIoU single/multi-scale, official Twins README: 48.8/50.2; mmseg 1.x
# reproduction: 49.65.
_base_ = './upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='l', drop_path_rate=0.3),
    decode_head=dict(in_channels=[128, 256, 512, 1024]),
    auxiliary_head=dict(in_channels=512))
