# TNT-S, patch 16 (4x4 words of 4x4 pixels per patch), 224x224 input,
# with the batch augments and loss of the TNT (DeiT-style) recipe.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmtnt.TNT',
        arch='s',
        img_size=224,
        patch_size=16,
        first_stride=4,
        drop_path_rate=0.1),
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=384,
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
