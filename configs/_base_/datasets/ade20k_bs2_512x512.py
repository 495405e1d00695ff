# ADE20K (150 classes) with mmseg's 512x512 pipeline (random resize of
# 2048x512 by 0.5-2.0, 512x512 crop, flip, photometric distortion; testing
# at 2048x512, aspect kept), 2 images per GPU: 16 per iteration on 8 GPUs,
# the batch of the Twins/Swin UperNet and PVT Semantic FPN recipes.
_base_ = 'mmseg::_base_/datasets/ade20k.py'

train_dataloader = dict(batch_size=2)
