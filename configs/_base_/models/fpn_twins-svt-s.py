# Semantic FPN with a Twins-SVT-S backbone: the PCPVT-S model
# (fpn_twins-pcpvt-s.py) with SVT's alternating local/global attention and
# a LayerNorm after every stage, as mmseg's SVT configs and the official
# detection SVT (`extra_norm=True`). Stage maps: 64/128/256/512 channels.
# Other sizes change `backbone.arch` and `neck.in_channels`.
_base_ = './fpn_twins-pcpvt-s.py'

model = dict(
    backbone=dict(
        type='mmtnt.SVT',
        arch='s',
        norm_after_stage=True,
        # ImageNet weights converted by tools/model_converters/twins2mmtnt.py:
        # init_cfg=dict(
        #     type='Pretrained',
        #     checkpoint='checkpoints/twins-svt-small_official_in1k.pth',
        #     prefix='backbone.'),
    ),
    neck=dict(in_channels=[64, 128, 256, 512]))
