"""Convert an official PyramidTNT checkpoint to mmtnt.

Example:
    python tools/model_converters/pyramid_tnt2mmtnt.py ptnt_s_82.0.pth.tar \
        checkpoints/pyramid-tnt-s_official_in1k.pth --allow-pickle
"""
from mmtnt.converters import convert_pyramid_tnt
from mmtnt.converters.cli import run_converter


def backbone_kwargs(meta):
    kwargs = f', arch={meta["arch"]!r}'
    if meta['img_size'] is not None:
        kwargs += f', img_size={meta["img_size"]}'
    return kwargs


if __name__ == '__main__':
    checkpoint = run_converter(
        convert_pyramid_tnt, 'Convert a PyramidTNT checkpoint of the '
        'official layout (huawei-noah/Efficient-AI-Backbones, '
        'ptnt_ti/s/m/b) to mmtnt.', backbone_kwargs)
    if isinstance(checkpoint['meta']['arch'], dict):
        print('The weights do not record the heads of the word attention: '
              'add num_heads_inner to the arch dict.')
