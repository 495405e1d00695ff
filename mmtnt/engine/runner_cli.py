"""What ``tools/train.py`` and ``tools/test.py`` share: the runner's
command-line options, how the common ones enter the config, and the checks
that stop them before the runner.

Examples:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> parser.add_argument('config')
    >>> add_runner_arguments(parser, 'train_cfg.max_epochs=1')
    >>> args = parse_runner_args(parser, ['cfg.py', '--local-rank', '1'])
    >>> args.launcher, args.local_rank
    ('none', 1)
"""
import os
import os.path as osp

from mmengine.config import DictAction

from ..hub import HubError, prepare_checkpoint
from ..utils import CheckpointFileError, check_data_paths, checkpoint_to_load


def add_runner_arguments(parser, cfg_options_example):
    """Add the options every runner tool takes: ``--cfg-options``,
    ``--launcher``, ``--no-cpu-accel`` and ``--local-rank``.

    Args:
        parser (argparse.ArgumentParser): The tool's parser; changed in
            place.
        cfg_options_example (str): Key=value pairs for the help of
            ``--cfg-options``, e.g. ``'train_cfg.max_epochs=1'``.
    """
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, as key=value pairs; '
        f'e.g. {cfg_options_example}')
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


def parse_runner_args(parser, argv=None):
    """Parse the command line and export ``LOCAL_RANK`` if it is unset, as
    mmengine's launchers read it.

    Args:
        parser (argparse.ArgumentParser): A parser with
            :func:`add_runner_arguments`.
        argv (list[str], optional): Arguments instead of ``sys.argv``.

    Returns:
        argparse.Namespace: The parsed arguments.
    """
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def set_launcher_and_work_dir(cfg, args):
    """Put ``--launcher`` and the work folder into the config: ``--work-dir``,
    else the config's ``work_dir``, else ``./work_dirs/<config name>``.

    Args:
        cfg (Config): The config read from ``args.config``.
        args (argparse.Namespace): From :func:`parse_runner_args`.

    Examples:
        >>> set_launcher_and_work_dir(cfg, args)  # no --work-dir, none in cfg
        >>> cfg.work_dir
        './work_dirs/tnt-demo_1xb128_fashion-mnist'
    """
    cfg.launcher = args.launcher
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])


def apply_final_overrides(cfg, args):
    """Apply the options that overrule everything else, last:
    ``--no-cpu-accel`` and ``--cfg-options``.

    Args:
        cfg (Config): The config, the tool's own options merged in.
        args (argparse.Namespace): From :func:`parse_runner_args`.
    """
    if args.no_cpu_accel:
        cfg.cpu_accel = False
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)


def check_run_inputs(cfg, dataloaders, prog):
    """Stop a tool before it builds the runner when the data of
    ``dataloaders`` or the checkpoint the runner would load cannot be
    read: with one line that names the path, not a traceback.

    The checkpoint is that of ``load_from`` or, for ``resume``, the one
    the runner would resume from (:func:`mmtnt.utils.checkpoint_to_load`);
    an ``mmtnt://NAME`` one is downloaded now (:mod:`mmtnt.hub`).

    Args:
        cfg (Config): The full config, the command line merged in.
        dataloaders (Sequence[str]): The dataloaders the tool runs, e.g.
            ``('test_dataloader', )``.
        prog (str): The tool, for the message, e.g. ``'tools/test.py'``.

    Raises:
        SystemExit: ``Error: ...`` when a dataset path is missing
            (:func:`mmtnt.utils.check_data_paths`); ``PROG: cannot read
            checkpoint ...`` when the checkpoint is missing, truncated or no
            checkpoint, or cannot be fetched by name.

    Examples:
        >>> cfg.load_from = 'truncated.pth'
        >>> check_run_inputs(cfg, ('test_dataloader', ), 'tools/test.py')
        Traceback (most recent call last):
        SystemExit: tools/test.py: cannot read checkpoint truncated.pth: ...
    """
    try:
        check_data_paths(cfg, dataloaders)
    except FileNotFoundError as error:
        raise SystemExit(f'Error: {error}')
    try:
        prepare_checkpoint(checkpoint_to_load(cfg))
    except (CheckpointFileError, HubError) as error:
        raise SystemExit(f'{prog}: {error}')
