"""The command lines of ``tools/train.py`` and ``tools/test.py``.

How the parsed options change the config is in
:mod:`mmtnt.engine.runner_config`.

Examples:
    >>> args = parse_train_args(['configs/demo/tnt-demo_1xb128_fashion-'
    ...                          'mnist.py', '--amp', '--local-rank', '1'])
    >>> args.tool, args.amp, args.launcher, args.local_rank
    ('train', True, 'none', 1)
    >>> parse_test_args(['cfg.py', 'ckpt.pth', '--out', 'preds.pkl']).out_item
    'pred'
"""
import argparse
import os

from ..utils.cli import add_cfg_options
from .amp import AMP_DTYPES


def add_runner_arguments(parser, cfg_options_example):
    """Add the options of both tools: ``--work-dir``, ``--cfg-options``,
    ``--launcher``, ``--no-cpu-accel`` and ``--local-rank``.

    Args:
        parser (argparse.ArgumentParser): The tool's parser; changed in
            place.
        cfg_options_example (str): Key=value pairs for the help of
            ``--cfg-options``, e.g. ``'train_cfg.max_epochs=1'``.
    """
    parser.add_argument(
        '--work-dir', help='the dir to save logs, metrics and checkpoints')
    add_cfg_options(parser, cfg_options_example)
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm'],
        default='none',
        help='job launcher')
    parser.add_argument(
        '--no-cpu-accel',
        action='store_true',
        help='on the CPU, run the plain model without mmtnt\'s CPU '
        'accelerator (the `cpu_accel` key of the config)')
    # torch.distributed.launch passes `--local-rank` from PyTorch 2.0 on,
    # `--local_rank` before.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)


def parse_runner_args(parser, tool, argv=None):
    """Parse the command line of ``tool`` and export ``LOCAL_RANK`` if it is
    unset, as mmengine's launchers read it.

    Args:
        parser (argparse.ArgumentParser): A parser with
            :func:`add_runner_arguments`.
        tool (str): ``'train'`` or ``'test'``, kept as ``args.tool``.
        argv (list[str], optional): Arguments instead of ``sys.argv``.

    Returns:
        argparse.Namespace: The parsed arguments.
    """
    parser.set_defaults(tool=tool)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def parse_train_args(argv=None):
    """Parse the command line of ``tools/train.py`` (``argv``, else
    ``sys.argv``).

    Examples:
        >>> parse_train_args(['cfg.py', '--resume']).resume
        'auto'
    """
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from the given checkpoint, or, without a value, from '
        'the latest checkpoint in the work directory')
    parser.add_argument(
        '--amp',
        action='store_true',
        help='automatic mixed precision: bfloat16 on the CPU and on CUDA '
        'GPUs with native bfloat16 (Ampere and later), float16 with dynamic '
        'loss scaling on older GPUs; a `dtype` in the optim_wrapper of the '
        'config is kept')
    parser.add_argument(
        '--amp-dtype',
        choices=AMP_DTYPES,
        help='autocast dtype of --amp, which it implies, over that of the '
        'config and the device; float16 (with dynamic loss scaling, or the '
        '`loss_scale` of the config) needs a CUDA GPU')
    parser.add_argument(
        '--compile',
        action='store_true',
        help='compile the train step with torch.compile (the `compile` key '
        'of the config; a dict there gives torch.compile arguments): the '
        'first iterations are slow while it compiles')
    parser.add_argument(
        '--auto-scale-lr',
        action='store_true',
        help='scale the learning rate by the actual total batch size over '
        '`auto_scale_lr.base_batch_size` of the config')
    add_runner_arguments(
        parser, 'train_cfg.max_epochs=1 optim_wrapper.optimizer.lr=0.01')
    return parse_runner_args(parser, 'train', argv)


def parse_test_args(argv=None):
    """Parse the command line of ``tools/test.py`` (``argv``, else
    ``sys.argv``).

    Examples:
        >>> parse_test_args(['cfg.py', 'ckpt.pth', '--tta']).tta
        True
    """
    parser = argparse.ArgumentParser(description='Test (and eval) a model')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--out',
        help='dump the predictions (a .pkl file) or, with --out-item '
        'metrics, the metrics (.json, .yaml or .pkl) to this file')
    parser.add_argument(
        '--out-item',
        choices=['pred', 'metrics'],
        default='pred',
        help='what --out dumps; defaults to the predictions')
    parser.add_argument(
        '--show-dir',
        help='save images with the predictions drawn on them to this dir')
    parser.add_argument(
        '--tta',
        action='store_true',
        help='test-time augmentation: `tta_model` and `tta_pipeline` of the '
        'config, or, for classification and detection, flip TTA by default')
    add_runner_arguments(parser, 'test_dataloader.batch_size=4')
    return parse_runner_args(parser, 'test', argv)
