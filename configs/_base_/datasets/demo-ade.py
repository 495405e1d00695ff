# The demo scenes in ADE20K's layout, for the semantic segmentation demos in
# configs/demo/. Data: `python tools/dataset_converters/make_demo_scenes.py`
# writes data/demo_scenes/ade (128x128 pictures with 2-4 Fashion-MNIST items
# of 4 classes each); nothing is downloaded. The label maps follow ADE20K's
# convention: 0 is "other" (ignored), 1 the scene behind the items, 2-5 the
# items; `reduce_zero_label=True` turns them into the 5 classes below.
dataset_type = 'BaseSegDataset'
data_root = 'data/demo_scenes/ade'
metainfo = dict(
    classes=('background', 'tshirt', 'trouser', 'sneaker', 'bag'),
    palette=[[120, 120, 120], [220, 20, 60], [0, 160, 60], [0, 60, 230],
             [250, 170, 30]])

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]

train_dataloader = dict(
    batch_size=8,
    num_workers=1,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        metainfo=metainfo,
        img_suffix='.jpg',
        seg_map_suffix='.png',
        reduce_zero_label=True,
        data_prefix=dict(
            img_path='images/training', seg_map_path='annotations/training'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=1,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        metainfo=metainfo,
        img_suffix='.jpg',
        seg_map_suffix='.png',
        reduce_zero_label=True,
        data_prefix=dict(
            img_path='images/validation',
            seg_map_path='annotations/validation'),
        pipeline=test_pipeline))
# the 100 validation scenes double as the test set
test_dataloader = val_dataloader

val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
