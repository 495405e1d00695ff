# Twins-PCPVT-S, 224x224 input, with the batch augments and loss of the
# Twins (DeiT-style) recipe. The other PCPVT sizes override `arch`,
# `drop_path_rate` and the head's `in_channels`.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmtnt.PCPVT',
        arch='s',
        # the globally pooled output of the last stage (after its norm)
        out_indices=-1,
        out_type='avg_featmap',
        drop_path_rate=0.2),
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=512,
        # label smoothing 0.1; also takes the soft targets of Mixup/CutMix
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        topk=(1, 5),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02)),
    # one of Mixup (alpha 0.8) or CutMix (alpha 1.0) on each batch
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0),
    ]),
)
