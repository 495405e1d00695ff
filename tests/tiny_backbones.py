"""Tiny archs of the four backbones, with every kind of block: TNT's inner
and outer transformers, PyramidTNT's word and pooled-sentence attentions
with their bias, PCPVT's sub-sampled and plain GSA, SVT's LSA on windows
that pad the maps of a 64x88 input."""
from mmtnt.models import PCPVT, SVT, TNT, PyramidTNT

TWINS_TINY = dict(
    embed_dims=[8, 16, 16, 32],
    depths=[1, 1, 1, 1],
    num_heads=[1, 2, 2, 2],
    mlp_ratios=[2, 2, 2, 2],
    sr_ratios=[4, 2, 1, 1])
SVT_TINY = dict(TWINS_TINY, depths=[2, 2, 1, 1], window_sizes=[3] * 4)
TNT_TINY = dict(
    embed_dims_outer=16,
    embed_dims_inner=4,
    num_layers=2,
    num_heads_outer=2,
    num_heads_inner=1)
# Words of at least 4 channels: a LayerNorm over 2 values (+-1 whatever
# the input) has gradients too ill-conditioned to compare in float32.
PYRAMID_TNT_TINY = dict(
    depths=[1, 1, 1, 1],
    outer_dims=[16, 16, 32, 32],
    inner_dims=[4, 4, 8, 8],
    num_heads_outer=[2, 2, 2, 2],
    num_heads_inner=[1, 1, 2, 2])

#: Family name -> a builder taking the backbone's other arguments.
TINY_BACKBONES = {
    'TNT': lambda **kw: TNT(arch=TNT_TINY, img_size=64, **kw),
    'PyramidTNT': lambda **kw: PyramidTNT(
        arch=PYRAMID_TNT_TINY, img_size=128, **kw),
    'PCPVT': lambda **kw: PCPVT(arch=TWINS_TINY, **kw),
    'SVT': lambda **kw: SVT(arch=SVT_TINY, **kw),
}
