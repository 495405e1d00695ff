# UperNet with Twins-PCPVT-S on ADE20K, 512x512 crops, 160k iterations: the
# Twins recipe (official segmentation configs, mmseg's Twins UperNet configs):
# AdamW lr 6e-5, weight decay 0.01 (none on norms and position terms), 1500
# iterations of linear warm-up then linear decay to 0, drop-path 0.2, and 32
# images per iteration (8 GPUs x 4): the released log
# (logs/upernet_pcpvt_s.txt) has 632 iterations per ADE20K epoch (20,210
# images), as the official config's base (samples_per_gpu=4) gives, and so
# does mmseg's config. The
# other Twins UperNets' logs have 1,264 (16 images), whatever the README's
# "global batch of 16" says of this one.
# mIoU single/multi-scale, official Twins README: 46.2/47.5; mmseg 1.x
# reproduction: 46.04.
_base_ = [
    '../_base_/models/upernet_twins-pcpvt-s.py',
    '../_base_/datasets/ade20k_bs2_512x512.py',
    '../_base_/schedules/ade20k_bs16_adamw_160k.py',
    'mmseg::_base_/default_runtime.py',
]

# The schedule exempts norms from weight decay.
# No weight decay on the position encodings either (the PEG
# convolutions `stages.i.pos_conv`; the official configs' key
# `pos_block` names them in the official code).
optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys={'.pos_conv.': dict(decay_mult=0.0)}))

train_dataloader = dict(batch_size=4)
auto_scale_lr = dict(base_batch_size=32)
