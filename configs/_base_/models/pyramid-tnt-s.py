# PyramidTNT-S (arXiv 2201.00978): conv stem, four stages at strides
# 8/16/32/64, the official mean-pooled and final-normed feature, with the
# batch augments and loss of the TNT (DeiT-style) recipe. The other variants
# change `backbone.arch`, `backbone.img_size` and `head.in_channels`.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmtnt.PyramidTNT',
        arch='s',
        img_size=256,
        out_indices=-1,
        out_type='avg_featmap',
        drop_path_rate=0.1),
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
