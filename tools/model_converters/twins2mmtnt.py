"""Convert a Twins checkpoint (official, timm, mmpretrain or mmseg) to mmtnt.

The layout is told apart by the keys; PCPVT and SVT by the weights.

Example:
    python tools/model_converters/twins2mmtnt.py alt_gvt_small.pth \
        checkpoints/twins-svt-small_official_in1k.pth --allow-pickle
"""
import argparse
import os.path as osp

import mmengine
import torch

from mmtnt.converters import convert_twins, load_checkpoint_file


def parse_args():
    parser = argparse.ArgumentParser(
        description='Convert a Twins (PCPVT or SVT) checkpoint of the '
        'official/timm, mmpretrain or mmseg layout (told apart by its keys) '
        'to mmtnt.')
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
    checkpoint = convert_twins(
        load_checkpoint_file(args.src, allow_pickle=args.allow_pickle))
    mmengine.mkdir_or_exist(osp.dirname(osp.abspath(args.dst)))
    torch.save(checkpoint, args.dst)
    meta = checkpoint['meta']
    extra = ''
    if meta['norm_after_stage'] != [False] * (len(meta['norm_after_stage']) -
                                               1) + [True]:
        extra = f', norm_after_stage={meta["norm_after_stage"]!r}'
    print(f'Converted {args.src} ({meta["source_format"]} keys) to '
          f'{args.dst}.\nBuild the backbone with '
          f"dict(type='mmtnt.{meta['model']}', arch={meta['arch']!r}{extra}) "
          "and load it with load_from or init_cfg=dict(type='Pretrained', "
          "checkpoint=..., prefix='backbone.').")


if __name__ == '__main__':
    main()
