# upernet_tnt-s-p16_8xb2-160k_ade20k-512x512.py with layer-wise learning-rate
# decay. Fine-tuning converted ImageNet weights, the lower blocks (generic
# features) should change less than the upper ones and the new head: the
# learning rate falls by `layer_decay_rate` per block from the head down (head,
# neck and final norm lr x 1, block i of 12 x 0.9 ** (13 - i), the embeddings
# x 0.9 ** 13 ~ 0.25), as BEiT (arXiv 2106.08254) fine-tunes on ImageNet and
# ADE20K and ConvNeXt (arXiv 2201.03545) on COCO and ADE20K. The depths are
# TNT.get_layer_depth's; mmtnt's constructor finds it on the segmentor's
# backbone (mmpretrain's own asks the model, which only classifiers answer).
# No published result.
_base_ = './upernet_tnt-s-p16_8xb2-160k_ade20k-512x512.py'

optim_wrapper = dict(
    constructor='mmtnt.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.9))
