# The 3x COCO schedule of the official Twins detection "Swin setting"
# (Meituan-AutoML/Twins, detection/configs/*_3x_coco_swin_setting.py, after
# Swin Transformer's): AdamW, lr 1e-4 at 16 images per iteration (8 GPUs x
# 2), betas (0.9, 0.999), weight decay 0.05 but none on normalisation layers
# (the official `'norm'` key; each model config adds its position terms to
# `paramwise_cfg.custom_keys`), 500 iterations of linear warm-up from
# 0.001 x lr (inherited there from the 1x base), 36 epochs with the LR
# divided by 10 after epochs 27 and 33. The official runs used fp16 with a
# static loss scale of 512; `tools/train.py --amp` trains in bfloat16 on GPUs
# that have it, `--amp-dtype float16` in float16 (dynamic loss scale).
_base_ = 'mmdet::_base_/schedules/schedule_1x.py'

max_epochs = 36
train_cfg = dict(max_epochs=max_epochs)

param_scheduler = [
    dict(
        type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
        end=500),
    dict(
        type='MultiStepLR',
        begin=0,
        end=max_epochs,
        by_epoch=True,
        milestones=[27, 33],
        gamma=0.1)
]

optim_wrapper = dict(
    type='OptimWrapper',
    # `fused=True`: PyTorch's one-kernel AdamW, the same update 2-4x faster
    # than the loop over parameters (CPU and CUDA).
    optimizer=dict(
        _delete_=True,
        type='AdamW',
        lr=1e-4,
        betas=(0.9, 0.999),
        weight_decay=0.05,
        fused=True),
    paramwise_cfg=dict(norm_decay_mult=0.0),
    clip_grad=None)

# `--auto-scale-lr` rescales the LR from 16 images per iteration.
auto_scale_lr = dict(enable=False, base_batch_size=16)
