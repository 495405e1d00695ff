# UperNet with a small PyramidTNT trained from scratch on the demo scenes
# (data/demo_scenes/ade, made by tools/dataset_converters/
# make_demo_scenes.py): the PCPVT demo's data, heads and schedule with
# another backbone.
_base_ = './upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'

# Four stages of one or two blocks, 32-256 channels, words of 4-32 channels.
# As in the paper's detection models, each stage map is upsampled by 2
# (strides 4, 8, 16 and 32 instead of 8-64); position terms made for the
# 128x128 crops.
backbone_channels = [32, 64, 128, 256]
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmtnt.PyramidTNT',
        arch=dict(
            depths=[1, 1, 2, 1],
            outer_dims=backbone_channels,
            inner_dims=[4, 8, 16, 32],
            num_heads_outer=[1, 2, 4, 8],
            num_heads_inner=[1, 1, 2, 4]),
        img_size=128,
        out_indices=(0, 1, 2, 3),
        out_type='featmap',
        upsample_featmaps=True,
        conv_norm_cfg=dict(type='GN', num_groups=4)),
    decode_head=dict(in_channels=backbone_channels),
    auxiliary_head=dict(in_channels=backbone_channels[2]))
