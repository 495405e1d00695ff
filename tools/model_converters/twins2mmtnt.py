"""Convert a Twins checkpoint (official, timm, mmpretrain or mmseg) to mmtnt.

The layout is told apart by the keys; PCPVT and SVT by the weights.

LayerNorm eps is not in the weights. mmtnt's defaults are the official ones
(1e-6 in blocks and after stages, 1e-5 in patch embeddings and after GSA's
reduction), right for the official, timm and mmpretrain releases and for
twins2mmseg.py's output. Segmentors fine-tuned in mmseg ran with eps 1e-5
everywhere: to reproduce them exactly, set ``norm_cfg``,
``patch_norm_cfg`` and ``sr_norm_cfg`` to ``dict(type='LN', eps=1e-5)``.

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
