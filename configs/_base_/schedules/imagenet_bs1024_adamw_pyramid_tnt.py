# The PyramidTNT schedule: the TNT one (AdamW, lr 1e-3 at a total batch of
# 1024, weight decay 0.05, no decay on norms, biases and the position
# embeddings `sentence_pos`/`word_pos`, cosine to epoch 300 and 10 cool-down
# epochs at the minimum lr) with 20 linear warm-up
# epochs (official: --warmup-epochs 20 --warmup-lr 1e-6). As in the official
# training, the attention biases (`relative_pos`) are decayed.
_base_ = './imagenet_bs1024_adamw_tnt.py'

# PyramidTNT has no class token: only its position embeddings are exempt.
optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys=dict(
            _delete_=True,
            sentence_pos=dict(decay_mult=0.0),
            word_pos=dict(decay_mult=0.0))))

param_scheduler = [
    # linear warm-up from 1e-6, updated every iteration
    dict(
        type='LinearLR',
        start_factor=1e-3,
        by_epoch=True,
        begin=0,
        end=20,
        convert_to_iter_based=True),
    # cosine decay to 1e-5, updated every iteration
    dict(
        type='CosineAnnealingLR',
        T_max=280,
        eta_min=1e-5,
        by_epoch=True,
        begin=20,
        end=300,
        convert_to_iter_based=True),
]
