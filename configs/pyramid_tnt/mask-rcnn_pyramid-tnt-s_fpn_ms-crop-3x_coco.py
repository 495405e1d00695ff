# Mask R-CNN with PyramidTNT-S (stage maps upsampled by 2) and FPN, 3x schedule
# with multi-scale training on COCO: the PyramidTNT paper's 3x setting (arXiv
# 2201.00978): AdamW lr 1e-4, weight decay 0.05, 36 epochs with the LR divided
# by 10 after epochs 27 and 33, 16 images per iteration. The multi-scale
# training with random crops (short side 480-800), the 500-iteration warm-up,
# drop-path 0.2 and the decay exemptions (norms, position terms) are those of
# the Twins/Swin setting.
# No published result.
_base_ = [
    '../_base_/models/mask-rcnn_pyramid-tnt-s_fpn.py',
    '../_base_/datasets/coco_instance_ms-crop.py',
    '../_base_/schedules/coco_bs16_adamw_3x.py',
    'mmdet::_base_/default_runtime.py',
]

# The schedule exempts norms from weight decay.
# No weight decay on the position embeddings (`sentence_pos`,
# `word_pos`) and the learned attention biases (`relative_pos`,
# like Swin's relative position bias tables in the Swin setting)
# either.
optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys={
            'sentence_pos': dict(decay_mult=0.0),
            'word_pos': dict(decay_mult=0.0),
            'relative_pos': dict(decay_mult=0.0),
        }))
