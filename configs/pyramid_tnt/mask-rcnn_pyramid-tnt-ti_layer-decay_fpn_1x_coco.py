# mask-rcnn_pyramid-tnt-ti_fpn_1x_coco.py with layer-wise learning-rate decay.
# Fine-tuning converted ImageNet weights, the lower blocks (generic features)
# should change less than the upper ones and the new neck and heads: the
# learning rate falls by `layer_decay_rate` per block from the heads down
# (heads, neck, final norm and upsampling lr x 1, the last of the 13 blocks
# x 0.9, the stem and position embeddings x 0.9 ** 14 ~ 0.23), as BEiT
# (arXiv 2106.08254) fine-tunes on ImageNet and ADE20K and ConvNeXt
# (arXiv 2201.03545) on COCO and ADE20K. The depths are
# PyramidTNT.get_layer_depth's (a stage's aggregation and attention bias with
# the block before it); mmtnt's constructor finds it on the detector's
# backbone (mmpretrain's own asks the model, which only classifiers answer).
# No published result.
_base_ = './mask-rcnn_pyramid-tnt-ti_fpn_1x_coco.py'

optim_wrapper = dict(
    constructor='mmtnt.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.9))
