# COCO instance segmentation with the multi-scale training of the Twins
# "Swin setting" 3x runs (from DETR / Sparse R-CNN; the same pipeline as
# mmdet's Swin `ms-crop-3x` configs): a random flip, then one of two
# branches: resize the short side to 480, 512, ..., 800 (long side at most
# 1333); or resize it to 400, 500 or 600, crop a random 384..600 region and
# resize as in the first branch. Testing stays single-scale (1333x800).
_base_ = 'mmdet::_base_/datasets/coco_instance.py'

# short sides 480, 512, ..., 800 with the long side at most 1333
multi_scales = [(480 + 32 * i, 1333) for i in range(11)]

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args={{_base_.backend_args}}),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(
        type='RandomChoice',
        transforms=[
            [
                dict(
                    type='RandomChoiceResize',
                    scales=multi_scales,
                    keep_ratio=True)
            ],
            [
                dict(
                    type='RandomChoiceResize',
                    scales=[(400, 1333), (500, 1333), (600, 1333)],
                    keep_ratio=True),
                dict(
                    type='RandomCrop',
                    crop_type='absolute_range',
                    crop_size=(384, 600),
                    allow_negative_crop=True),
                dict(
                    type='RandomChoiceResize',
                    scales=multi_scales,
                    keep_ratio=True)
            ],
        ]),
    dict(type='PackDetInputs')
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
