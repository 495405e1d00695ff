# Mask R-CNN with PyramidTNT-S fine-tuned on your own COCO-format boxes and
# masks (docs/custom_data.md): the COCO recipe
# (configs/pyramid_tnt/mask-rcnn_pyramid-tnt-s_fpn_1x_coco.py) with your
# classes, 4 images per iteration on one GPU and 24 epochs. Data as for
# retinanet_twins-pcpvt-s_fpn_1xb4-24e_custom-coco.py, the json's
# annotations with a `segmentation` (polygons or RLE) each:
#
#   data/custom/coco/annotations/train.json
#   data/custom/coco/annotations/val.json
#   data/custom/coco/train/...
#   data/custom/coco/val/...
#
# `classes` are category names of the json, listed in the order of its
# `categories`. The backbone starts from ImageNet weights converted once
# with
#   python tools/model_converters/pyramid_tnt2mmtnt.py PTNT_S_FILE \
#       checkpoints/pyramid-tnt-s_official_in1k.pth --allow-pickle
# The schedule is a starting point, not a tuned recipe.
_base_ = '../pyramid_tnt/mask-rcnn_pyramid-tnt-s_fpn_1x_coco.py'

classes = ('apple', 'banana', 'orange')
data_root = 'data/custom/coco/'
metainfo = dict(classes=classes)

model = dict(
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/pyramid-tnt-s_official_in1k.pth',
            prefix='backbone.')),
    roi_head=dict(
        bbox_head=dict(num_classes=len(classes)),
        mask_head=dict(num_classes=len(classes))))

train_dataloader = dict(
    batch_size=4,
    num_workers=4,
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/train.json',
        data_prefix=dict(img='train/')))
val_dataloader = dict(
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/val.json',
        data_prefix=dict(img='val/')))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/val.json')
test_evaluator = val_evaluator

# The COCO recipe's AdamW lr 1e-4 (set for 16 images per iteration;
# `--auto-scale-lr` scales it to the batch used), a short warm-up, 24 epochs
# with the lr divided by 10 after epochs 16 and 22.
max_epochs = 24
train_cfg = dict(max_epochs=max_epochs, val_interval=2)
param_scheduler = [
    dict(
        type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
        end=100),
    dict(
        type='MultiStepLR',
        begin=0,
        end=max_epochs,
        by_epoch=True,
        milestones=[16, 22],
        gamma=0.1)
]
default_hooks = dict(
    checkpoint=dict(interval=2, max_keep_ckpts=1, save_best='auto'))
