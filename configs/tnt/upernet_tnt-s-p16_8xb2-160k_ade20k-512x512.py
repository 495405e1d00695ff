# UperNet with TNT-S (patch 16) and a simple feature pyramid on ADE20K, 512x512
# crops, 160k iterations. No TNT segmentor was published: the recipe is the
# Twins UperNet one (the only published segmentation recipe among mmtnt's
# families): AdamW lr 6e-5, weight decay 0.01 (none on norms and position
# terms), 1500 iterations of linear warm-up then linear decay to 0, 16 images
# per iteration (8 GPUs x 2), drop-path 0.2. Drop-path as Twins-PCPVT of
# similar size.
# No published result.
_base_ = [
    '../_base_/models/upernet_tnt-s-p16.py',
    '../_base_/datasets/ade20k_bs2_512x512.py',
    '../_base_/schedules/ade20k_bs16_adamw_160k.py',
    'mmseg::_base_/default_runtime.py',
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
