# Mask R-CNN with a PyramidTNT-S backbone, as the PyramidTNT paper's
# detectors (arXiv 2201.00978): each stage map is upsampled by 2 (2x2
# transposed convolution, norm, GELU, then 3x3 convolution, norm, GELU),
# giving strides 4, 8, 16 and 32 (128/256/512/512 channels) for mmdet's Mask
# R-CNN FPN (P2-P6). The input keeps TNT's 0.5/0.5 normalisation. Other
# sizes change `backbone.arch`, `backbone.img_size` and `neck.in_channels`.
_base_ = 'mmdet::_base_/models/mask-rcnn_r50_fpn.py'

model = dict(
    data_preprocessor=dict(mean=[127.5, 127.5, 127.5],
                           std=[127.5, 127.5, 127.5]),
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
        # SyncBN in the stem and the upsampling: 2 images per GPU are too
        # few for BatchNorm statistics (mmengine turns it into BN when
        # training without distribution).
        conv_norm_cfg=dict(type='SyncBN', requires_grad=True),
        # ImageNet weights converted by
        # tools/model_converters/pyramid_tnt2mmtnt.py:
        # init_cfg=dict(
        #     type='Pretrained',
        #     checkpoint='checkpoints/pyramid-tnt-s_official_in1k.pth',
        #     prefix='backbone.'),
    ),
    neck=dict(in_channels=[128, 256, 512, 512]))
