# UperNet with PyramidTNT-B on ADE20K, 512x512 crops, 160k iterations: the
# recipe of upernet_pyramid-tnt-s_8xb2-160k_ade20k-512x512.py (Twins' UperNet
# recipe: AdamW lr 6e-5, weight decay 0.01, 1500-iteration warm-up, linear
# decay, 16 images per iteration) with the PyramidTNT-B backbone (position
# terms stored at 256x256) and drop-path 0.3 (as Twins-PCPVT of similar size).
# No published result.
_base_ = './upernet_pyramid-tnt-s_8xb2-160k_ade20k-512x512.py'

model = dict(
    backbone=dict(arch='b', img_size=256, drop_path_rate=0.3),
    decode_head=dict(in_channels=[256, 512, 1024, 1024]),
    auxiliary_head=dict(in_channels=1024))
