"""The command lines of ``tools/train.py`` and ``tools/test.py``
(:mod:`mmtnt.engine.runner_config` merges them into the config).

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
    """Add the options both tools take to ``parser``, with
    ``cfg_options_example`` in the help of ``--cfg-options``."""
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
    # torch.distributed.launch passes `--local_rank` before PyTorch 2.0.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)


def parse_runner_args(parser, tool, argv=None):
    """Parse ``argv`` with ``tool`` (``'train'``/``'test'``) as
    ``args.tool``; export ``LOCAL_RANK`` for mmengine's launchers if
    unset."""
    parser.set_defaults(tool=tool)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def parse_train_args(argv=None):
    """Parse the command line of ``tools/train.py``."""
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
    """Parse the command line of ``tools/test.py``."""
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
