# RetinaNet with PyramidTNT-S (stage maps upsampled by 2) and FPN, 1x schedule
# on COCO: the PyramidTNT paper's 1x setting (arXiv 2201.00978): AdamW lr 1e-4,
# weight decay 0.05, 12 epochs with the LR divided by 10 after epochs 8 and 11,
# 16 images per iteration (8 GPUs x 2), single-scale 1333x800 training. The
# paper states no warm-up, drop-path or decay exemptions: 500 iterations of
# linear warm-up and drop-path 0.2 as the Twins setting, no weight decay on
# norms and position terms as the Swin setting.
# PyramidTNT paper, COCO val2017: 42.0 box AP (57.7 AP_L).
_base_ = [
    '../_base_/models/retinanet_pyramid-tnt-s_fpn.py',
    'mmdet::_base_/datasets/coco_detection.py',
    '../_base_/schedules/coco_bs16_adamw_1x.py',
    'mmdet::_base_/default_runtime.py',
]

# The paper: weight decay 0.05; none on norms here.
# No weight decay on the position embeddings (`sentence_pos`,
# `word_pos`) and the learned attention biases (`relative_pos`,
# like Swin's relative position bias tables in the Swin setting)
# either.
optim_wrapper = dict(
    optimizer=dict(weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        custom_keys={
            'sentence_pos': dict(decay_mult=0.0),
            'word_pos': dict(decay_mult=0.0),
            'relative_pos': dict(decay_mult=0.0),
        }))
