# UperNet with TNT-B (patch 16) on ADE20K, 512x512 crops, 160k iterations: the
# recipe of upernet_tnt-s-p16_8xb2-160k_ade20k-512x512.py (Twins' UperNet
# recipe: AdamW lr 6e-5, weight decay 0.01, 1500-iteration warm-up, linear
# decay, 16 images per iteration) with the TNT-B (patch 16) backbone (640
# channels) and drop-path 0.3 (as Twins-PCPVT-B).
# No published result.
_base_ = './upernet_tnt-s-p16_8xb2-160k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='b', drop_path_rate=0.3),
    neck=dict(in_channels=640),
    decode_head=dict(in_channels=[640, 640, 640, 640]),
    auxiliary_head=dict(in_channels=640))
