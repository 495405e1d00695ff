# UperNet with Twins-PCPVT-B on ADE20K as mmseg released it
# (mmseg::twins/twins_pcpvt-b_uperhead_8xb2-160k_ade20k-512x512.py, mIoU
# 47.91), to load its weights converted by
# tools/model_converters/twins2mmtnt.py: the model of
# upernet_twins-pcpvt-b_8xb2-160k_ade20k-512x512.py (the same heads, norms
# after stages and test settings) with mmseg's LayerNorm eps 1e-5 in the
# blocks, where mmtnt has the official 1e-6 (both have 1e-5 in the patch
# embeddings and GSA's reductions), and mmseg's recipe: no weight-decay
# exemption for the position encodings (mmseg's `pos_block` key matches none of
# its parameters); drop-path 0.3, as mmseg's config (the official code ran
# 0.2).
# Weights (mmseg model zoo):
# https://download.openmmlab.com/mmsegmentation/v0.5/twins/twins_pcpvt-b_uperhead_8x2_512x512_160k_ade20k/twins_pcpvt-b_uperhead_8x2_512x512_160k_ade20k_20211130_141020-02094ea5.pth
_base_ = './upernet_twins-pcpvt-b_8xb2-160k_ade20k-512x512.py'

model = dict(
    backbone=dict(norm_cfg=dict(type='LN', eps=1e-5), drop_path_rate=0.3))

optim_wrapper = dict(
    paramwise_cfg=dict(
        _delete_=True, custom_keys={'norm': dict(decay_mult=0.0)}))
