"""The command line shared by ``tools/model_converters/*2mmtnt.py``."""
import argparse
import os.path as osp

import mmengine
import torch

from .common import load_checkpoint_file


def run_converter(convert, description, backbone_kwargs, argv=None):
    """Parse ``SRC DST [--allow-pickle]``, convert and save a checkpoint.

    Args:
        convert (Callable[[dict], dict]): A converter such as
            :func:`mmtnt.converters.convert_tnt`; its output's ``meta``
            holds at least ``model`` and ``source_format``.
        description (str): What the command converts, for ``--help``.
        backbone_kwargs (Callable[[dict], str]): Formats the backbone
            arguments to suggest (e.g. ``", arch='s'"``) from ``meta``.
        argv (list[str], optional): Arguments instead of ``sys.argv``.

    Returns:
        dict: The saved checkpoint.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('src', help='the checkpoint to convert')
    parser.add_argument('dst', help='where to save the mmtnt checkpoint')
    parser.add_argument(
        '--allow-pickle',
        action='store_true',
        help='load a source that holds pickled Python objects (training '
        'arguments in official releases); only for files you trust')
    args = parser.parse_args(argv)

    checkpoint = convert(
        load_checkpoint_file(args.src, allow_pickle=args.allow_pickle))
    mmengine.mkdir_or_exist(osp.dirname(osp.abspath(args.dst)))
    torch.save(checkpoint, args.dst)
    meta = checkpoint['meta']
    print(f'Converted {args.src} ({meta["source_format"]} keys) to '
          f'{args.dst}.\nBuild the backbone with '
          f"dict(type='mmtnt.{meta['model']}'{backbone_kwargs(meta)}) and "
          "load it with load_from or init_cfg=dict(type='Pretrained', "
          "checkpoint=..., prefix='backbone.').")
    return checkpoint
