# Semantic FPN with Twins-SVT-B on ADE20K as mmseg released it
# (mmseg::twins/twins_svt-b_fpn_fpnhead_8xb4-80k_ade20k-512x512.py, mIoU
# 46.77), to load its weights converted by
# tools/model_converters/twins2mmtnt.py: the model of
# fpn_twins-svt-b_8xb2-80k_ade20k-512x512.py (the same FPN, head, norms after
# stages and test settings) with mmseg's LayerNorm eps 1e-5 in the blocks and
# after the stages, where mmtnt has the official 1e-6 (both have 1e-5 in the
# patch embeddings and GSA's reductions), and mmseg's recipe: 32 images per
# iteration (8 GPUs x 4) and a constant LR of 1e-4 (mmseg's poly schedule keeps
# its SGD base's minimum LR, 1e-4, the AdamW LR itself).
# mmseg's Twins-SVT masks the padding of its windows wrongly when one of the
# two pads is 0 (maps of one side a multiple of 7): on such inputs mmtnt's
# outputs differ from mmseg's (mmtnt masks correctly).
# Weights (mmseg model zoo):
# https://download.openmmlab.com/mmsegmentation/v0.5/twins/twins_svt-b_fpn_fpnhead_8x4_512x512_80k_ade20k/twins_svt-b_fpn_fpnhead_8x4_512x512_80k_ade20k_20211201_113849-88b2907c.pth
_base_ = './fpn_twins-svt-b_8xb2-80k_ade20k-512x512.py'

model = dict(backbone=dict(norm_cfg=dict(type='LN', eps=1e-5)))

train_dataloader = dict(batch_size=4)
param_scheduler = [
    dict(
        type='PolyLR',
        eta_min=1e-4,
        power=0.9,
        by_epoch=False,
        begin=0,
        end=80000)
]
auto_scale_lr = dict(base_batch_size=32)
