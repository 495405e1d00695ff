# The UperNet 160k ADE20K schedule of Twins (the official segmentation
# `*_swin_setting` configs, after Swin Transformer; mmseg's Twins UperNet
# configs): AdamW, lr 6e-5 at 16 images per iteration (8 GPUs x 2), betas
# (0.9, 0.999), weight decay 0.01 but none on parameters whose name holds
# `norm` (the official key: the backbone's norms, not the heads' BatchNorms,
# which mmcv names `bn`; each model config adds its position terms to
# `paramwise_cfg.custom_keys`),
# 1500 iterations of linear warm-up from 1e-6 x lr, then linear ("poly",
# power 1) decay to 0 at 160k iterations. Validation and checkpoints every
# 16k iterations (mmseg's 160k base).
_base_ = 'mmseg::_base_/schedules/schedule_160k.py'

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    # `fused=True`: PyTorch's one-kernel AdamW, the same update 2-4x faster
    # than the loop over parameters (CPU and CUDA).
    optimizer=dict(
        type='AdamW',
        lr=6e-5,
        betas=(0.9, 0.999),
        weight_decay=0.01,
        fused=True),
    paramwise_cfg=dict(custom_keys={'norm': dict(decay_mult=0.0)}),
    clip_grad=None)

param_scheduler = [
    dict(
        type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0,
        end=1500),
    dict(
        type='PolyLR',
        eta_min=0.0,
        power=1.0,
        by_epoch=False,
        begin=1500,
        end=160000)
]

# `--auto-scale-lr` rescales the LR from 16 images per iteration.
auto_scale_lr = dict(enable=False, base_batch_size=16)
