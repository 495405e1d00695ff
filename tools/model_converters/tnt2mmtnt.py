"""Convert a TNT checkpoint (official, timm or mmpretrain) to mmtnt.

Example:
    python tools/model_converters/tnt2mmtnt.py tnt_s_81.5.pth.tar \
        checkpoints/tnt-s-p16_official_in1k.pth
"""
import argparse
import os.path as osp

import mmengine
import torch

from mmtnt.converters import convert_tnt, load_checkpoint_file


def parse_args():
    parser = argparse.ArgumentParser(
        description='Convert a TNT checkpoint of the official, timm or '
        'mmpretrain layout (told apart by its keys) to mmtnt.')
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
    checkpoint = convert_tnt(
        load_checkpoint_file(args.src, allow_pickle=args.allow_pickle))
    mmengine.mkdir_or_exist(osp.dirname(osp.abspath(args.dst)))
    torch.save(checkpoint, args.dst)
    meta = checkpoint['meta']
    print(f'Converted {args.src} ({meta["source_format"]} keys) to '
          f'{args.dst}.\nBuild the backbone with '
          f"dict(type='mmtnt.TNT', arch={meta['arch']!r}, "
          f"layout={meta['layout']!r}) and load it with load_from or "
          "init_cfg=dict(type='Pretrained', checkpoint=..., "
          "prefix='backbone.').")


if __name__ == '__main__':
    main()
