# The TNT schedule: AdamW, lr 1e-3 at a total batch of 1024, weight decay
# 0.05, and timm's cosine as the official training runs it (tnt_pytorch/
# train.py of huawei-noah/Efficient-AI-Backbones, timm 0.3): 300 epochs from
# epoch 0 to the minimum lr 1e-5, the first 5 replaced by a linear warm-up
# from 1e-6 (--warmup-epochs 5 --warmup-lr 1e-6), the lr set once per epoch,
# then 10 epochs at the minimum lr (--cooldown-epochs 10): 310 epochs.
optim_wrapper = dict(
    # `fused=True`: PyTorch's one-kernel AdamW, the same update 2-4x faster
    # than the loop over parameters (CPU and CUDA).
    optimizer=dict(
        type='AdamW',
        lr=1e-3,
        weight_decay=0.05,
        eps=1e-8,
        betas=(0.9, 0.999),
        fused=True),
    # No weight decay on norms, biases, the class token and the position
    # embeddings (mmtnt names them `cls_token`, `sentence_pos`, `word_pos`).
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={
            'cls_token': dict(decay_mult=0.0),
            'sentence_pos': dict(decay_mult=0.0),
            'word_pos': dict(decay_mult=0.0),
        }),
)

# mmtnt.WarmupCosineLR: the warm-up is laid over the cosine, not put
# before it; epoch-based, so the lr stays constant within an epoch.
param_scheduler = [
    dict(
        type='mmtnt.WarmupCosineLR',
        T_max=300,
        eta_min=1e-5,
        warmup_steps=5,
        warmup_start=1e-6,
        by_epoch=True),
]

# After the cosine ends, the lr stays at eta_min for the cool-down epochs.
train_cfg = dict(by_epoch=True, max_epochs=310, val_interval=1)
val_cfg = dict()
test_cfg = dict()

# The learning rate above is for 16 GPUs x 64 images = 1024 per iteration;
# `--auto-scale-lr` rescales it to the batch actually used.
auto_scale_lr = dict(base_batch_size=1024)
