# RetinaNet with TNT-S (patch 16), a simple feature pyramid and FPN, 1x
# schedule on COCO. No TNT detector was published: the recipe is that of the
# closest family, PyramidTNT (same authors and TNT blocks), whose paper (arXiv
# 2201.00978) trains its 1x detectors with AdamW lr 1e-4, weight decay 0.05, 12
# epochs with the LR divided by 10 after epochs 8 and 11, 16 images per
# iteration (8 GPUs x 2), single-scale 1333x800 training. The paper states no
# warm-up, drop-path or decay exemptions: 500 iterations of linear warm-up and
# drop-path 0.2 as the Twins setting, no weight decay on norms and position
# terms as the Swin setting.
# No published result.
_base_ = [
    '../_base_/models/retinanet_tnt-s-p16_fpn.py',
    'mmdet::_base_/datasets/coco_detection.py',
    '../_base_/schedules/coco_bs16_adamw_1x.py',
    'mmdet::_base_/default_runtime.py',
]

# PyramidTNT: weight decay 0.05, none on norms.
# No weight decay on the class token and the position embeddings
# either (mmtnt's `cls_token`, `sentence_pos`, `word_pos`).
optim_wrapper = dict(
    optimizer=dict(weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        custom_keys={
            'cls_token': dict(decay_mult=0.0),
            'sentence_pos': dict(decay_mult=0.0),
            'word_pos': dict(decay_mult=0.0),
        }))
