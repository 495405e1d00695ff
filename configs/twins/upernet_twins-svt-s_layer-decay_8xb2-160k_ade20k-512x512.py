# upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py with layer-wise learning-
# rate decay. Fine-tuning converted ImageNet weights, the lower blocks
# (generic features) should change less than the upper ones and the new
# heads: the learning rate falls by `layer_decay_rate` per block from the
# heads down (heads and final norm lr x 1, the last of the 18 blocks x 0.93,
# the first patch embedding x 0.93 ** 19 ~ 0.25, as TNT-S's embeddings at 0.9
# over its 12 blocks), as BEiT (arXiv 2106.08254) fine-tunes on ImageNet and
# ADE20K and ConvNeXt (arXiv 2201.03545) on COCO and ADE20K. The depths are
# SVT.get_layer_depth's (a stage's patch embedding with the block before it,
# its position encoding with its first block); mmtnt's constructor finds it
# on the segmentor's backbone (mmpretrain's own asks the model, which only
# classifiers answer).
# No published result.
_base_ = './upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py'

optim_wrapper = dict(
    constructor='mmtnt.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.93))
