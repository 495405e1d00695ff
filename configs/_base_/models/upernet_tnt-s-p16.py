# UperNet with a TNT-S backbone (patch 16) for 512x512 ADE20K crops. No TNT
# segmentor was published: the model follows mmseg's BEiT/MAE UperNet for
# isotropic backbones. TNT blocks 3, 5, 7 and 11 (stride 16, 384 channels)
# are rescaled by mmtnt.FeaturePyramid to strides 4, 8, 16 and 32 (two or
# one transposed convolutions, the map itself, a max-pooling) for mmseg's
# UPerHead; the stride-16 level feeds the auxiliary FCN head. The input
# keeps TNT's 0.5/0.5 normalisation. TNT-B changes `backbone.arch` and the
# channels (640).
_base_ = 'mmseg::_base_/models/upernet_r50.py'

norm_cfg = dict(type='SyncBN', requires_grad=True)
data_preprocessor = dict(
    mean=[127.5, 127.5, 127.5],
    std=[127.5, 127.5, 127.5],
    size=(512, 512),
    # TNT pads its input to its patch (16) itself; whole test images are
    # padded to multiples of 32, so that the pyramid's levels halve exactly
    # (the padding is cut from the predictions).
    test_cfg=dict(size_divisor=32))
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,
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
    neck=dict(
        type='mmtnt.FeaturePyramid',
        in_channels=384,
        scales=(4, 2, 1, 0.5),
        norm_cfg=norm_cfg,
        act_cfg=dict(type='GELU')),
    decode_head=dict(in_channels=[384, 384, 384, 384], num_classes=150),
    auxiliary_head=dict(in_channels=384, num_classes=150))
