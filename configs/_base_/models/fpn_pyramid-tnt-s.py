# Semantic FPN with a PyramidTNT-S backbone for 512x512 ADE20K crops. No
# PyramidTNT segmentor was published: the backbone gives the paper's
# detection pyramid (each stage map upsampled by 2: strides 4, 8, 16, 32,
# 128/256/512/512 channels) to the FPN (256 channels, 4 levels) and mmseg's
# FPNHead, as the Twins Semantic FPN. The input keeps TNT's 0.5/0.5
# normalisation. Other sizes change `backbone.arch`, `backbone.img_size`
# and `neck.in_channels`.
_base_ = 'mmseg::_base_/models/fpn_r50.py'

data_preprocessor = dict(
    mean=[127.5, 127.5, 127.5],
    std=[127.5, 127.5, 127.5],
    size=(512, 512))
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='mmtnt.PyramidTNT',
        arch='s',
        # the size the position terms are stored at (the ImageNet training
        # size); they are resized to every input
        img_size=256,
        out_indices=(0, 1, 2, 3),
        out_type='featmap',
        upsample_featmaps=True,
        drop_path_rate=0.2,
        # SyncBN in the stem and the upsampling, as in the heads.
        conv_norm_cfg=dict(type='SyncBN', requires_grad=True),
        # ImageNet weights converted by
        # tools/model_converters/pyramid_tnt2mmtnt.py:
        # init_cfg=dict(
        #     type='Pretrained',
        #     checkpoint='checkpoints/pyramid-tnt-s_official_in1k.pth',
        #     prefix='backbone.'),
    ),
    neck=dict(in_channels=[128, 256, 512, 512]),
    decode_head=dict(num_classes=150))
