"""The command line of ``tools/train.py``: its options, and the config they
make (:func:`load_config`), checked before the runner is built.

Examples:
    >>> args = parse_args(['configs/demo/tnt-demo_1xb128_fashion-mnist.py',
    ...                    '--amp', '--work-dir', 'work_dirs/demo'])
    >>> cfg = merge_args(Config.fromfile(args.config), args)
    >>> cfg.optim_wrapper.type, cfg.work_dir  # on the CPU
    ('mmtnt.CPUAmpOptimWrapper', 'work_dirs/demo')
"""
import argparse

from mmengine.config import Config

from .amp import enable_amp
from .compile_hook import CompileHook
from .runner_cli import (add_runner_arguments, apply_final_overrides,
                         check_run_inputs, parse_runner_args,
                         set_launcher_and_work_dir)

PROG = 'tools/train.py'
# The autocast dtypes of `--amp-dtype`.
AMP_DTYPES = ('bfloat16', 'float16')


def parse_args(argv=None):
    """Parse the command line of ``tools/train.py``; ``LOCAL_RANK`` is
    exported if unset.

    Args:
        argv (list[str], optional): Arguments instead of ``sys.argv``.

    Returns:
        argparse.Namespace: The parsed arguments.

    Examples:
        >>> parse_args(['cfg.py', '--resume']).resume
        'auto'
    """
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
    add_runner_arguments(
        parser, 'train_cfg.max_epochs=1 optim_wrapper.optimizer.lr=0.01')
    return parse_runner_args(parser, argv)


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
        args (argparse.Namespace): The parsed arguments
            (:func:`parse_args`).

    Returns:
        Config: The updated config.

    Raises:
        ValueError: When ``--amp-dtype`` or the config's AMP dtype does not
            suit the device (:func:`mmtnt.engine.enable_amp`), or
            ``--auto-scale-lr`` finds no ``auto_scale_lr.base_batch_size``.

    Examples:
        >>> cfg = merge_args(Config.fromfile(args.config), args)
        >>> cfg.work_dir  # without --work-dir nor one in the config
        './work_dirs/tnt-demo_1xb128_fashion-mnist'
    """
    set_launcher_and_work_dir(cfg, args)

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

    apply_final_overrides(cfg, args)
    add_compile_hooks(cfg)
    return cfg


def load_config(args):
    """The config ``tools/train.py`` trains: read, the command line merged
    in (:func:`merge_args`), its training and validation data and the
    checkpoint to load or resume from checked
    (:func:`mmtnt.engine.runner_cli.check_run_inputs`).

    Args:
        args (argparse.Namespace): The parsed arguments
            (:func:`parse_args`).

    Returns:
        Config: The config to build the runner from.

    Raises:
        SystemExit: With one line, when the arguments do not suit the
            config or the device, or the data or the checkpoint cannot be
            read.
    """
    cfg = Config.fromfile(args.config)
    try:
        cfg = merge_args(cfg, args)
    except ValueError as error:
        raise SystemExit(f'{PROG}: {error}')
    check_run_inputs(cfg, ('train_dataloader', 'val_dataloader'), PROG)
    return cfg
