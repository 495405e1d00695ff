# UperNet with a small TNT trained from scratch on the demo scenes
# (data/demo_scenes/ade, made by tools/dataset_converters/
# make_demo_scenes.py): the PCPVT demo's data, heads and schedule with an
# isotropic backbone. mmtnt.FeaturePyramid rescales the outputs of the four
# TNT blocks (stride 16) to strides 4, 8, 16 and 32 for UPerHead.
_base_ = './upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'

# Four blocks of 128-channel sentences (16x16-pixel patches) and 8-channel
# words (4x4 pixels); the position embedding made for the 128x128 crops.
channels = 128
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmtnt.TNT',
        arch=dict(
            embed_dims_outer=channels,
            embed_dims_inner=8,
            num_layers=4,
            num_heads_outer=4,
            num_heads_inner=2),
        img_size=128,
        out_indices=(0, 1, 2, 3),
        out_type='featmap'),
    neck=dict(
        type='mmtnt.FeaturePyramid',
        in_channels=channels,
        scales=(4, 2, 1, 0.5),
        norm_cfg=dict(type='GN', num_groups=16),
        act_cfg=dict(type='GELU')),
    decode_head=dict(in_channels=[channels] * 4),
    auxiliary_head=dict(in_channels=channels))
