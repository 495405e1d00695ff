"""The command line shared by ``tools/model_converters/*2mmtnt.py``."""
import argparse
import os.path as osp

import mmengine
import torch

from ..utils import CheckpointFileError, check_checkpoint_file
from .common import load_checkpoint_file


def run_converter(convert,
                  description,
                  backbone_kwargs,
                  argv=None,
                  whole_models=False):
    """Parse ``SRC DST [--allow-pickle]``, convert and save a checkpoint.

    Args:
        convert (Callable[[dict], dict]): A converter such as
            :func:`mmtnt.converters.convert_tnt`.
        description (str): What the command converts, for ``--help``.
        backbone_kwargs (Callable[[dict], str]): Formats the backbone
            arguments to suggest (e.g. ``", arch='s'"``) from ``meta``.
        argv (list[str], optional): Arguments instead of ``sys.argv``.
        whole_models (bool): Whether ``convert`` converts whole detectors
            and segmentors (adds ``--backbone-only``). Defaults to False.

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
    if whole_models:
        parser.add_argument(
            '--backbone-only',
            action='store_true',
            help='of a detector or segmentor, keep only the backbone (as '
            'ImageNet weights are used: init_cfg or a backbone to fine-tune)')
    args = parser.parse_args(argv)
    try:
        check_checkpoint_file(args.src)
    except CheckpointFileError as error:
        raise SystemExit(f'{parser.prog}: {error}')

    kwargs = dict(backbone_only=args.backbone_only) if whole_models else {}
    checkpoint = convert(
        load_checkpoint_file(args.src, allow_pickle=args.allow_pickle),
        **kwargs)
    mmengine.mkdir_or_exist(osp.dirname(osp.abspath(args.dst)))
    torch.save(checkpoint, args.dst)
    meta = checkpoint['meta']
    if 'head_layout' in meta:
        print(describe_whole_model(args.src, args.dst, meta, backbone_kwargs))
    else:
        print(f'Converted {args.src} ({meta["source_format"]} keys) to '
              f'{args.dst}.\nBuild the backbone with '
              f"dict(type='mmtnt.{meta['model']}'{backbone_kwargs(meta)}) "
              "and load it with load_from or init_cfg=dict(type='Pretrained',"
              " checkpoint=..., prefix='backbone.').")
    return checkpoint


def describe_whole_model(src, dst, meta, backbone_kwargs):
    """Lines for the terminal: what a converted detector or segmentor is
    and the config (or backbone) to load it into."""
    lines = [
        f'Converted {src} ({meta["source"]}; {meta["source_format"]} '
        f'backbone keys) to {dst}: a {meta["head_layout"]} '
        f'{meta["task"]} model with a {meta["model"]} backbone, '
        f'{meta["num_classes"]} classes.'
    ]
    options = ' '.join(meta['cfg_options'])
    if meta['config'] is not None:
        lines.append(f'Config: {meta["config"]}')
        lines.append(
            f'Load it with load_from={dst!r} or test it with: python '
            f'tools/test.py {meta["config"]} {dst}' +
            (f' --cfg-options {options}' if options else ''))
    else:
        lines.append(
            'No mmtnt config has these sizes: build the backbone with '
            f"dict(type='mmtnt.{meta['model']}'{backbone_kwargs(meta)}) in "
            f'a {meta["head_layout"]} config and load the file with '
            'load_from.')
    return '\n'.join(lines)
