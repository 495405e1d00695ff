"""Convert an official PyramidTNT checkpoint to mmtnt.

Example:
    python tools/model_converters/pyramid_tnt2mmtnt.py ptnt_s_82.0.pth.tar \
        checkpoints/pyramid-tnt-s_official_in1k.pth
"""
import argparse
import os.path as osp

import mmengine
import torch

from mmtnt.converters import convert_pyramid_tnt, load_checkpoint_file


def parse_args():
    parser = argparse.ArgumentParser(
        description='Convert a PyramidTNT checkpoint of the official layout '
        '(huawei-noah/Efficient-AI-Backbones, ptnt_ti/s/m/b) to mmtnt.')
    parser.add_argument('src', help='the checkpoint to convert')
    parser.add_argument('dst', help='where to save the mmtnt checkpoint')
    parser.add_argument(
        '--allow-pickle',
        action='store_true',
        help='load a source that holds pickled Python objects (training '
        'arguments in official releases); only for files you trust')
    return parser.parse_args()


def main():
    args = parse_args()
    checkpoint = convert_pyramid_tnt(
        load_checkpoint_file(args.src, allow_pickle=args.allow_pickle))
    mmengine.mkdir_or_exist(osp.dirname(osp.abspath(args.dst)))
    torch.save(checkpoint, args.dst)
    meta = checkpoint['meta']
    backbone = f"dict(type='mmtnt.PyramidTNT', arch={meta['arch']!r}"
    if meta['img_size'] is not None:
        backbone += f", img_size={meta['img_size']}"
    print(f'Converted {args.src} ({meta["source_format"]} keys) to '
          f'{args.dst}.\nBuild the backbone with {backbone}) and load it '
          "with load_from or init_cfg=dict(type='Pretrained', "
          "checkpoint=..., prefix='backbone.').")
    if isinstance(meta['arch'], dict):
        print('The weights do not record the heads of the word attention: '
              'add num_heads_inner to the arch dict.')


if __name__ == '__main__':
    main()
