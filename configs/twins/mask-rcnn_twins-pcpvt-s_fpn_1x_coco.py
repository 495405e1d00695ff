# Mask R-CNN with Twins-PCPVT-S and FPN, 1x schedule on COCO: the official
# Twins "PVT setting" (Meituan-AutoML/Twins,
# detection/configs/*_1x_coco_pvt_setting.py): AdamW lr 2e-4, weight decay 1e-4
# on every parameter, 12 epochs with the LR divided by 10 after epochs 8 and
# 11, 500 iterations of linear warm-up, drop-path 0.2, 16 images per iteration
# (8 GPUs x 2), single-scale 1333x800 training.
# Twins paper, COCO val2017 (as commonly cited): 42.9 box AP, 40.0 mask AP.
_base_ = [
    '../_base_/models/mask-rcnn_twins-pcpvt-s_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    '../_base_/schedules/coco_bs16_adamw_1x.py',
    'mmdet::_base_/default_runtime.py',
]

# The official Mask R-CNN runs use lr 2e-4.
optim_wrapper = dict(optimizer=dict(lr=2e-4))
