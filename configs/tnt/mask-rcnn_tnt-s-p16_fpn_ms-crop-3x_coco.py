# Mask R-CNN with TNT-S (patch 16), a simple feature pyramid and FPN, 3x
# schedule with multi-scale training on COCO. No TNT detector was published:
# the recipe is that of the closest family, PyramidTNT (same authors and TNT
# blocks), whose paper (arXiv 2201.00978) trains its 3x Mask R-CNN with AdamW
# lr 1e-4, weight decay 0.05, 36 epochs with the LR divided by 10 after epochs
# 27 and 33, 16 images per iteration. The multi-scale training with random
# crops (short side 480-800), the 500-iteration warm-up, drop-path 0.2 and the
# decay exemptions (norms, position terms) are those of the Twins/Swin setting.
# No published result.
_base_ = [
    '../_base_/models/mask-rcnn_tnt-s-p16_fpn.py',
    '../_base_/datasets/coco_instance_ms-crop.py',
    '../_base_/schedules/coco_bs16_adamw_3x.py',
    'mmdet::_base_/default_runtime.py',
]

# The schedule exempts norms from weight decay.
# No weight decay on the class token and the position embeddings
# either (mmtnt's `cls_token`, `sentence_pos`, `word_pos`).
optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys={
            'cls_token': dict(decay_mult=0.0),
            'sentence_pos': dict(decay_mult=0.0),
            'word_pos': dict(decay_mult=0.0),
        }))
