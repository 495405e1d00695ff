"""Convert a Twins checkpoint (official, timm, mmpretrain or mmseg) to mmtnt.

Classifiers convert to a backbone and a classifier; detectors and
segmentors convert whole (``--backbone-only`` keeps the backbone), and the
command prints the mmtnt config that loads the result. The layouts and
sources are listed in :mod:`mmtnt.converters.twins`.

LayerNorm eps is not in the weights: mmtnt's defaults are the official ones
(1e-6 in blocks, 1e-5 in patch embeddings), right for every source but
mmseg's segmentors, which ran with 1e-5 everywhere (their configs set it;
for a backbone alone set ``norm_cfg=dict(type='LN', eps=1e-5)``).

Examples:
    python tools/model_converters/twins2mmtnt.py alt_gvt_small.pth \
        checkpoints/twins-svt-small_official_in1k.pth --allow-pickle
    python tools/model_converters/twins2mmtnt.py \
        twins_pcpvt-s_uperhead_8x4_512x512_160k_ade20k_20211201_233537-8e99c07a.pth \
        checkpoints/upernet_twins-pcpvt-s_mmseg_8xb4-160k_ade20k-512x512.pth
    python tools/model_converters/twins2mmtnt.py mask_rcnn_alt_gvt_s.pth \
        checkpoints/twins-svt-s_backbone.pth --backbone-only
"""  # noqa: E501
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
        'to mmtnt: classifiers, and detectors and segmentors whole (mmseg, '
        'official Twins segmentation and detection code).', backbone_kwargs,
        whole_models=True)
