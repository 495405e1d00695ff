# The TNT schedule: AdamW, lr 1e-3 at a total batch of 1024, weight decay
# 0.05, 5 linear warm-up epochs, cosine to epoch 300, then 10 epochs at the
# minimum lr: the official training uses timm's scheduler, whose
# cool-down epochs (`--cooldown-epochs 10`) make the run 310 epochs long.
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

param_scheduler = [
    # linear warm-up, updated every iteration
    dict(
        type='LinearLR',
        start_factor=1e-3,
        by_epoch=True,
        begin=0,
        end=5,
        convert_to_iter_based=True),
    # cosine decay, updated every iteration
    dict(
        type='CosineAnnealingLR',
        T_max=295,
        eta_min=1e-5,
        by_epoch=True,
        begin=5,
        end=300,
        convert_to_iter_based=True),
]

# After the cosine ends, the lr stays at eta_min for the cool-down epochs.
train_cfg = dict(by_epoch=True, max_epochs=310, val_interval=1)
val_cfg = dict()
test_cfg = dict()

# The learning rate above is for 16 GPUs x 64 images = 1024 per iteration;
# `--auto-scale-lr` rescales it to the batch actually used.
auto_scale_lr = dict(base_batch_size=1024)
