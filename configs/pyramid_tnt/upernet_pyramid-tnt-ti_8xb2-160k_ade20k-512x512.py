# UperNet with PyramidTNT-Ti on ADE20K, 512x512 crops, 160k iterations: the
# recipe of upernet_pyramid-tnt-s_8xb2-160k_ade20k-512x512.py (Twins' UperNet
# recipe: AdamW lr 6e-5, weight decay 0.01, 1500-iteration warm-up, linear
# decay, 16 images per iteration) with the PyramidTNT-Ti backbone (position
# terms stored at 192x192) and drop-path 0.2 (as Twins-PCPVT of similar size).
# No published result.
_base_ = './upernet_pyramid-tnt-s_8xb2-160k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='ti', img_size=192),
    decode_head=dict(in_channels=[80, 160, 320, 320]),
    auxiliary_head=dict(in_channels=320))
