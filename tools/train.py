"""Train a classifier, detector or segmentor with an mmtnt backbone.

The config's ``default_scope`` (``mmpretrain``, ``mmdet`` or ``mmseg``)
decides the task: mmengine's registries import the matching library on
their own when the runner builds the modules.

Examples::

    python tools/train.py configs/demo/tnt-demo_1xb128_fashion-mnist.py
    python tools/train.py CONFIG --resume            # latest in work_dir
    python tools/train.py CONFIG --amp --cfg-options train_cfg.max_epochs=1
    python tools/train.py CONFIG --compile --amp     # torch.compile + AMP
    bash tools/dist_train.sh CONFIG 2                # 2 processes
"""
import argparse
import os
import os.path as osp

from mmengine.config import Config, DictAction
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from mmtnt.accel import accelerate_runner
from mmtnt.engine import CompileHook, enable_amp
from mmtnt.hub import HubError, prepare_checkpoint
from mmtnt.utils import (CheckpointFileError, check_data_paths,
                         checkpoint_to_load, register_checkpoint_safe_globals,
                         setup_cpu_distributed, shutdown_cpu_distributed)

# The autocast dtypes of `--amp-dtype`.
AMP_DTYPES = ('bfloat16', 'float16')


def parse_args():
    """Parse the command line; ``LOCAL_RANK`` is exported if unset."""
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
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
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, as key=value pairs; '
        'e.g. train_cfg.max_epochs=1 optim_wrapper.optimizer.lr=0.01')
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
    args = parser.parse_args()
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def enable_compile(cfg):
    """Have the runner compile the model's ``train_step`` with
    ``torch.compile``.

    mmengine's runner reads ``cfg.compile``: True for the default arguments
    (the inductor backend), or a dict of ``torch.compile`` arguments, which
    is kept as it is.

    Args:
        cfg (Config): The full config; changed in place.
    """
    if not isinstance(cfg.get('compile'), dict):
        cfg.compile = True


def add_compile_hooks(cfg):
    """Add the hooks that a compiled train step needs, if the config
    compiles (``cfg.compile`` is True or a dict).

    :class:`CompileHook` works around what TorchDynamo cannot trace or
    keeps recompiling in mmengine's train step.

    Args:
        cfg (Config): The full config; changed in place.
    """
    if not cfg.get('compile'):
        return
    hook = dict(type=f'mmtnt.{CompileHook.__name__}')
    hooks = list(cfg.get('custom_hooks', []))
    if hook['type'] not in [h.get('type') for h in hooks]:
        cfg.custom_hooks = hooks + [hook]


def merge_args(cfg, args):
    """Merge the command-line arguments into the config.

    Args:
        cfg (Config): The config read from ``args.config``.
        args (argparse.Namespace): The parsed arguments.

    Returns:
        Config: The updated config.
    """
    cfg.launcher = args.launcher

    # work_dir: command line > config > ./work_dirs/<config name>
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])

    if args.amp or args.amp_dtype:
        enable_amp(cfg, args.amp_dtype)
    if args.compile:
        enable_compile(cfg)

    # `--resume` alone finds the latest checkpoint in work_dir.
    if args.resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    elif args.resume is not None:
        cfg.resume = True
        cfg.load_from = args.resume

    if args.auto_scale_lr:
        if 'base_batch_size' not in cfg.get('auto_scale_lr', {}):
            raise ValueError('--auto-scale-lr needs `auto_scale_lr = dict('
                             'base_batch_size=...)` in the config.')
        cfg.auto_scale_lr.enable = True

    if args.no_cpu_accel:
        cfg.cpu_accel = False
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    add_compile_hooks(cfg)
    return cfg


def main():
    args = parse_args()
    cfg = Config.fromfile(args.config)
    try:
        cfg = merge_args(cfg, args)
    except ValueError as error:
        raise SystemExit(f'tools/train.py: {error}')
    try:
        check_data_paths(cfg, ('train_dataloader', 'val_dataloader'))
    except FileNotFoundError as error:
        raise SystemExit(f'Error: {error}')
    try:
        prepare_checkpoint(checkpoint_to_load(cfg))
    except (CheckpointFileError, HubError) as error:
        raise SystemExit(f'tools/train.py: {error}')

    setup_cpu_distributed(cfg)
    register_checkpoint_safe_globals()
    if 'runner_type' in cfg:
        runner = RUNNERS.build(cfg)
    else:
        runner = Runner.from_cfg(cfg)
    # On the CPU: mmtnt.accelerate_for_cpu, unless switched off.
    accelerate_runner(runner)
    runner.train()
    shutdown_cpu_distributed()


if __name__ == '__main__':
    main()
