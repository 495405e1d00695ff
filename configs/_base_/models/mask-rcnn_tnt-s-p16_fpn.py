# Mask R-CNN with a TNT-S backbone (patch 16). No TNT detector was
# published: the model follows the simple feature pyramid of ViTDet/BEiT for
# isotropic backbones. TNT blocks 3, 5, 7 and 11 (stride 16, 384 channels)
# are rescaled by mmtnt.FeaturePyramid to strides 4, 8, 16 and 32 (two or
# one transposed convolutions, the map itself, a max-pooling), then mmdet's
# Mask R-CNN FPN makes P2-P6. The input keeps TNT's 0.5/0.5 normalisation.
# TNT-B changes `backbone.arch` and the channels (640).
_base_ = 'mmdet::_base_/models/mask-rcnn_r50_fpn.py'

# SyncBN between the transposed convolutions of the pyramid: 2 images per
# GPU are too few for BatchNorm statistics (mmengine turns it into BN when
# training without distribution).
pyramid_norm_cfg = dict(type='SyncBN', requires_grad=True)

model = dict(
    data_preprocessor=dict(mean=[127.5, 127.5, 127.5],
                           std=[127.5, 127.5, 127.5]),
    backbone=dict(
        _delete_=True,
        type='mmtnt.TNT',
        arch='s',
        img_size=224,
        patch_size=16,
        first_stride=4,
        out_indices=(3, 5, 7, 11),
        out_type='featmap',
        drop_path_rate=0.2,
        # ImageNet weights converted by tools/model_converters/tnt2mmtnt.py
        # (set `layout` to the one it prints):
        # init_cfg=dict(
        #     type='Pretrained',
        #     checkpoint='checkpoints/tnt-s-p16_official_in1k.pth',
        #     prefix='backbone.'),
    ),
    # A list of modules is built as nn.Sequential: pyramid, then FPN.
    neck=[
        dict(
            type='mmtnt.FeaturePyramid',
            in_channels=384,
            scales=(4, 2, 1, 0.5),
            norm_cfg=pyramid_norm_cfg,
            act_cfg=dict(type='GELU')),
        dict(
            type='FPN',
            in_channels=[384, 384, 384, 384],
            out_channels=256,
            num_outs=5),
    ])
