# UperNet with Twins-SVT-S on ADE20K as mmseg released it
# (mmseg::twins/twins_svt-s_uperhead_8xb2-160k_ade20k-512x512.py, mIoU 46.08),
# to load its weights converted by tools/model_converters/twins2mmtnt.py: the
# model of upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py (the same heads,
# norms after stages and test settings) with mmseg's LayerNorm eps 1e-5 in the
# blocks and after the stages, where mmtnt has the official 1e-6 (both have
# 1e-5 in the patch embeddings and GSA's reductions), and mmseg's recipe: no
# weight-decay exemption for the position encodings (mmseg's `pos_block` key
# matches none of its parameters).
# mmseg's Twins-SVT masks the padding of its windows wrongly when one of the
# two pads is 0 (maps of one side a multiple of 7): on such inputs mmtnt's
# outputs differ from mmseg's (mmtnt masks correctly).
# Weights (mmseg model zoo):
# https://download.openmmlab.com/mmsegmentation/v0.5/twins/twins_svt-s_uperhead_8x2_512x512_160k_ade20k/twins_svt-s_uperhead_8x2_512x512_160k_ade20k_20211130_141005-e48a2d94.pth
_base_ = './upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py'

model = dict(backbone=dict(norm_cfg=dict(type='LN', eps=1e-5)))

optim_wrapper = dict(
    paramwise_cfg=dict(
        _delete_=True, custom_keys={'norm': dict(decay_mult=0.0)}))
