# RetinaNet with a TNT-S backbone (patch 16). No TNT detector was published:
# the model follows the simple feature pyramid of ViTDet/BEiT for isotropic
# backbones. TNT blocks 5, 7 and 11 (stride 16, 384 channels) are rescaled
# by mmtnt.FeaturePyramid to strides 8, 16 and 32 (a transposed
# convolution, the map itself, a max-pooling), then mmdet's RetinaNet FPN
# makes P3-P5 and adds P6/P7 on its last input. RetinaNet uses no stride-4
# level, so none is built (a stride-4 branch would hold parameters that
# never get a gradient). The input keeps TNT's 0.5/0.5 normalisation.
# TNT-B changes `backbone.arch` and the channels (640).
_base_ = 'mmdet::_base_/models/retinanet_r50_fpn.py'

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
        out_indices=(5, 7, 11),
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
            scales=(2, 1, 0.5),
            norm_cfg=pyramid_norm_cfg,
            act_cfg=dict(type='GELU')),
        dict(
            type='FPN',
            in_channels=[384, 384, 384],
            out_channels=256,
            start_level=0,
            add_extra_convs='on_input',
            num_outs=5),
    ])
