# TNT-S in the legacy pixel-embedding layout: one convolution over the whole
# image before the words are cut out, a norm over the words' channels only
# and a projection with a bias. This is the layout of timm's
# `tnt_s_legacy_patch16_224` and mmpretrain's `tnt-small-p16_3rdparty_in1k`
# weights (converted with tools/model_converters/tnt2mmtnt.py); the rest of
# the recipe is the TNT-S one (tnt-s-p16_16xb64_in1k.py), the test pipeline
# included (short edge 248, centre crop 224, mean = std = 0.5).
# Published top-1: 81.5 (timm), 81.52 (mmpretrain).
_base_ = ['./tnt-s-p16_16xb64_in1k.py']

model = dict(backbone=dict(layout='legacy'))
