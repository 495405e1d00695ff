# Mask R-CNN with Twins-PCPVT-S and FPN, 3x schedule with multi-scale training
# on COCO: the official Twins "Swin setting" (Meituan-AutoML/Twins,
# detection/configs/*_3x_coco_swin_setting.py): AdamW lr 1e-4, weight decay
# 0.05 (none on norms and position encodings), 36 epochs with the LR divided by
# 10 after epochs 27 and 33, 500 iterations of linear warm-up, multi-scale
# training with random crops (short side 480-800), drop-path 0.2, 16 images per
# iteration (8 GPUs x 2).
_base_ = [
    '../_base_/models/mask-rcnn_twins-pcpvt-s_fpn.py',
    '../_base_/datasets/coco_instance_ms-crop.py',
    '../_base_/schedules/coco_bs16_adamw_3x.py',
    'mmdet::_base_/default_runtime.py',
]

# The schedule exempts norms from weight decay.
# No weight decay on the position encodings either (the PEG
# convolutions `stages.i.pos_conv`; the official configs' key
# `pos_block` names them in the official code).
optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys={'.pos_conv.': dict(decay_mult=0.0)}))
