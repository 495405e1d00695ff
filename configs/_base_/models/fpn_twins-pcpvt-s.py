# Semantic FPN with a Twins-PCPVT-S backbone for 512x512 ADE20K crops, as
# the official Twins (after PVT) and mmseg's Twins configs: the four stage
# maps (strides 4-32, 64/128/320/512 channels) feed an FPN (256 channels,
# 4 levels) and mmseg's FPNHead (128 channels, SyncBN). Other sizes change
# `backbone.arch` and `neck.in_channels`.
_base_ = 'mmseg::_base_/models/fpn_r50.py'

data_preprocessor = dict(size=(512, 512))
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='mmtnt.PCPVT',
        arch='s',
        out_indices=(0, 1, 2, 3),
        out_type='featmap',
        # No norm after any stage, as mmseg's PCPVT configs and the official
        # detection PCPVT (SVT has one after every stage).
        norm_after_stage=False,
        drop_path_rate=0.2,
        # ImageNet weights converted by tools/model_converters/twins2mmtnt.py:
        # init_cfg=dict(
        #     type='Pretrained',
        #     checkpoint='checkpoints/twins-pcpvt-small_official_in1k.pth',
        #     prefix='backbone.'),
    ),
    neck=dict(in_channels=[64, 128, 320, 512]),
    decode_head=dict(num_classes=150))
