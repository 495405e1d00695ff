# The 1x COCO schedule of the official Twins detection "PVT setting"
# (Meituan-AutoML/Twins, detection/configs/*_1x_coco_pvt_setting.py, which
# take it from PVT): AdamW, lr 1e-4 at 16 images per iteration (8 GPUs x 2),
# weight decay 1e-4 on every parameter (the official setting has no
# per-parameter rules), no gradient clipping, 500 iterations of linear
# warm-up from 0.001 x lr, 12 epochs with the LR divided by 10 after epochs
# 8 and 11 (mmdet's 1x scheduler and loops). The Twins Mask R-CNN configs
# raise the LR to 2e-4, as the official ones; the TNT and PyramidTNT configs
# raise the weight decay to 0.05 (PyramidTNT paper) and exempt norms and
# position terms.
_base_ = 'mmdet::_base_/schedules/schedule_1x.py'

optim_wrapper = dict(
    type='OptimWrapper',
    # `fused=True`: PyTorch's one-kernel AdamW, the same update 2-4x faster
    # than the loop over parameters (CPU and CUDA).
    optimizer=dict(
        _delete_=True,
        type='AdamW',
        lr=1e-4,
        betas=(0.9, 0.999),
        weight_decay=1e-4,
        fused=True),
    clip_grad=None)

# `--auto-scale-lr` rescales the LR from 16 images per iteration.
auto_scale_lr = dict(enable=False, base_batch_size=16)
