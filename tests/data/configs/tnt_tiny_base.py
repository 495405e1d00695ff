# What tnt_tiny_cls.py and tnt_tiny_seg.py share: a two-block TNT backbone
# for 32x32 images, the common hooks and the runtime. The two configs add
# the default scope, the model's type and head, the data and the schedule.
model = dict(
    backbone=dict(
        type='mmtnt.TNT',
        arch=dict(
            embed_dims_outer=32,
            embed_dims_inner=8,
            num_layers=2,
            num_heads_outer=2,
            num_heads_inner=2),
        img_size=32,
        patch_size=8,
        first_stride=2))

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=1),
    param_scheduler=dict(type='ParamSchedulerHook'),
    sampler_seed=dict(type='DistSamplerSeedHook'))
env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'))
log_level = 'INFO'
load_from = None
resume = False
