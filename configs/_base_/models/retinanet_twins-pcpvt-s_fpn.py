# RetinaNet with a Twins-PCPVT-S backbone, as the official Twins detection
# code (Meituan-AutoML/Twins, detection/gvt.py and configs): the maps of the
# four stages (strides 4-32, 64/128/320/512 channels) feed mmdet's RetinaNet
# FPN, which starts at stage 1 and adds P6/P7 on the last input (P3-P7).
# Other sizes change `backbone.arch` and `neck.in_channels`.
_base_ = 'mmdet::_base_/models/retinanet_r50_fpn.py'

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmtnt.PCPVT',
        arch='s',
        out_indices=(0, 1, 2, 3),
        out_type='featmap',
        # No norm after any stage: the official detection PCPVT returns the
        # stage maps as they are (its classification norm goes unused), as
        # do mmseg's PCPVT configs (norm_after_stage=False).
        norm_after_stage=False,
        drop_path_rate=0.2,
        # ImageNet weights converted by tools/model_converters/twins2mmtnt.py:
        # init_cfg=dict(
        #     type='Pretrained',
        #     checkpoint='checkpoints/twins-pcpvt-small_official_in1k.pth',
        #     prefix='backbone.'),
    ),
    neck=dict(in_channels=[64, 128, 320, 512]))
