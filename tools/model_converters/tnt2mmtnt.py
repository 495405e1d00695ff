"""Convert a TNT checkpoint (official, timm or mmpretrain) to mmtnt.

The layout is told apart by the keys.

Example:
    python tools/model_converters/tnt2mmtnt.py tnt_s_81.5.pth.tar \
        checkpoints/tnt-s-p16_official_in1k.pth --allow-pickle
"""
from mmtnt.converters import convert_tnt
from mmtnt.converters.cli import run_converter


def backbone_kwargs(meta):
    return f", arch={meta['arch']!r}, layout={meta['layout']!r}"


if __name__ == '__main__':
    run_converter(
        convert_tnt, 'Convert a TNT checkpoint of the official, timm or '
        'mmpretrain layout (told apart by its keys) to mmtnt.',
        backbone_kwargs)
