"""Convert a Twins checkpoint (official, timm, mmpretrain or mmseg) to mmtnt.

The layout is told apart by the keys; PCPVT and SVT by the weights.

Example:
    python tools/model_converters/twins2mmtnt.py alt_gvt_small.pth \
        checkpoints/twins-svt-small_official_in1k.pth --allow-pickle
"""
from mmtnt.converters import convert_twins
from mmtnt.converters.cli import run_converter


def backbone_kwargs(meta):
    kwargs = f', arch={meta["arch"]!r}'
    norms = meta['norm_after_stage']
    if norms != [False] * (len(norms) - 1) + [True]:
        kwargs += f', norm_after_stage={norms!r}'
    return kwargs


if __name__ == '__main__':
    run_converter(
        convert_twins, 'Convert a Twins (PCPVT or SVT) checkpoint of the '
        'official/timm, mmpretrain or mmseg layout (told apart by its keys) '
        'to mmtnt.', backbone_kwargs)
