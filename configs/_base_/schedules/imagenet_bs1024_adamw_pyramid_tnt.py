# The PyramidTNT recipe: the TNT schedule (AdamW, lr 1e-3 at a total batch of
# 1024, weight decay 0.05, no decay on norms, biases and the position
# embeddings `sentence_pos`/`word_pos`, timm's cosine to epoch 300 stepped
# once per epoch, then 10 cool-down epochs at the minimum lr) with 20 warm-up
# epochs (official: --warmup-epochs 20 --warmup-lr 1e-6). As in the official
# training, the attention biases (`relative_pos`) are decayed. The EMA of the
# weights (below) is part of the recipe.
_base_ = './imagenet_bs1024_adamw_tnt.py'

# PyramidTNT has no class token: only its position embeddings are exempt.
optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys=dict(
            _delete_=True,
            sentence_pos=dict(decay_mult=0.0),
            word_pos=dict(decay_mult=0.0))))

# The warm-up replaces the first 20 epochs of the 300-epoch cosine (it does
# not delay it): 5.05e-4 at epoch 150, as in the official runs.
param_scheduler = [
    dict(
        type='mmtnt.WarmupCosineLR',
        T_max=300,
        eta_min=1e-5,
        warmup_steps=20,
        warmup_start=1e-6,
        by_epoch=True),
]

# Exponential moving average of the weights (timm's model_ema_decay
# 0.99996); validation and the saved checkpoints use the averaged weights.
# As timm's ModelEma, it averages the stem's BatchNorm statistics too
# (`update_buffers`) instead of copying the live ones. The momentum counts
# iterations: keep the total batch of 1024 (docs/classification.md).
custom_hooks = [
    dict(
        type='EMAHook',
        momentum=4e-5,
        update_buffers=True,
        priority='ABOVE_NORMAL')
]
