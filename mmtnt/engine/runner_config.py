"""The config ``tools/train.py`` and ``tools/test.py`` build the runner from:
the file with the command line (:mod:`mmtnt.engine.cli`) merged in, its data
and checkpoint checked. The ``default_scope`` decides how ``--show-dir``,
``--tta`` and ``--out`` apply.

Examples:
    >>> from mmtnt.engine.cli import parse_test_args
    >>> args = parse_test_args(['configs/demo/tnt-demo_1xb128_fashion-'
    ...                         'mnist.py', 'epoch_4.pth', '--tta'])
    >>> cfg = merge_test_args(read_config(args.config), args)
    >>> cfg.model.type, cfg.load_from
    ('mmpretrain.AverageClsScoreTTA', 'epoch_4.pth')
    >>> cfg = load_config(args)  # merged, and epoch_4.pth checked
    Traceback (most recent call last):
    SystemExit: tools/test.py: cannot read checkpoint epoch_4.pth: ...
"""
import copy
import os.path as osp

from mmengine.config import ConfigDict
from mmengine.registry import METRICS

from ..hub import HubError, prepare_checkpoint
from ..utils import (CheckpointFileError, check_data_paths,
                     checkpoint_to_load, setup_cpu_distributed)
from ..utils.cli import load_config as read_config
from .amp import enable_amp
from .compile_hook import add_compile_hook, enable_compile

TASKS = ('mmpretrain', 'mmdet', 'mmseg')

# What `--tta` uses when the config has no `tta_model`; mmseg has no default.
DEFAULT_TTA_MODELS = dict(
    mmpretrain=dict(type='mmpretrain.AverageClsScoreTTA'),
    mmdet=dict(
        type='mmdet.DetTTAModel',
        tta_cfg=dict(nms=dict(type='nms', iou_threshold=0.5),
                     max_per_img=100)),
)

# The metric that dumps predictions for `--out`.
DUMP_METRICS = dict(
    mmpretrain='DumpResults',
    mmdet='mmdet.DumpDetResults',
    mmseg='DumpResults')


def set_launcher_and_work_dir(cfg, args):
    """Set ``launcher`` and ``work_dir`` (``--work-dir``, the config's, else
    ``./work_dirs/<config name>``)."""
    cfg.launcher = args.launcher
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])


def apply_final_overrides(cfg, args):
    """Apply ``--no-cpu-accel`` and ``--cfg-options``, which overrule the
    rest."""
    if args.no_cpu_accel:
        cfg.cpu_accel = False
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)


def merge_train_args(cfg, args):
    """Merge the command line of ``tools/train.py`` into ``cfg`` and return
    it; ValueError when an option does not suit the config or device."""
    set_launcher_and_work_dir(cfg, args)
    if args.amp or args.amp_dtype:
        enable_amp(cfg, args.amp_dtype)
    if args.compile:
        enable_compile(cfg)
    # `--resume` alone finds the latest checkpoint in work_dir.
    if args.resume is not None:
        cfg.resume = True
        cfg.load_from = None if args.resume == 'auto' else args.resume
    if args.auto_scale_lr:
        if 'base_batch_size' not in cfg.get('auto_scale_lr', {}):
            raise ValueError('--auto-scale-lr needs `auto_scale_lr = dict('
                             'base_batch_size=...)` in the config.')
        cfg.auto_scale_lr.enable = True
    apply_final_overrides(cfg, args)
    add_compile_hook(cfg)
    return cfg


def get_task(cfg):
    """The config's ``default_scope``; ValueError if not in ``TASKS``."""
    task = cfg.get('default_scope')
    if task not in TASKS:
        raise ValueError(f'default_scope must be one of {TASKS} for '
                         f'tools/test.py, got {task!r}.')
    return task


def enable_visualization(cfg, show_dir):
    """Have the visualization hook save drawn images to ``show_dir``, made
    absolute as mmdet's hook reads a relative one from the work dir."""
    hook = cfg.get('default_hooks', {}).get('visualization')
    if hook is None:
        raise ValueError('--show-dir needs a `visualization` hook in '
                         '`default_hooks` of the config.')
    task = get_task(cfg)
    show_dir = osp.abspath(show_dir)
    if task == 'mmpretrain':
        hook.update(enable=True, interval=1, out_dir=show_dir)
    elif task == 'mmdet':
        hook.update(draw=True, test_out_dir=show_dir)
    else:
        hook.draw = True
        cfg.visualizer.save_dir = show_dir


def innermost_dataset(dataset_cfg):
    """The dataset config inside dataset wrappers (not a copy)."""
    while 'dataset' in dataset_cfg:
        dataset_cfg = dataset_cfg['dataset']
    return dataset_cfg


def enable_tta(cfg):
    """Wrap the model in the TTA model and use the TTA test pipeline.

    Defaults: ``DEFAULT_TTA_MODELS`` of the task, and the test pipeline
    with its packing transform run on the image flipped and as is.
    """
    task = get_task(cfg)
    if 'tta_model' not in cfg:
        if task not in DEFAULT_TTA_MODELS:
            raise ValueError(f'--tta for {task} needs `tta_model` and '
                             '`tta_pipeline` in the config.')
        cfg.tta_model = DEFAULT_TTA_MODELS[task]
    dataset = innermost_dataset(cfg.test_dataloader.dataset)
    if 'tta_pipeline' not in cfg:
        pipeline = copy.deepcopy(dataset.pipeline)
        pipeline[-1] = dict(
            type='TestTimeAug',
            transforms=[[
                dict(type='RandomFlip', prob=1.),
                dict(type='RandomFlip', prob=0.)
            ], [pipeline[-1]]])
        cfg.tta_pipeline = pipeline
    cfg.model = ConfigDict(**cfg.tta_model, module=cfg.model)
    dataset.pipeline = cfg.tta_pipeline


def merge_test_args(cfg, args):
    """Merge the command line of ``tools/test.py`` into ``cfg`` and return
    it; ValueError when ``--show-dir`` or ``--tta`` does not suit it."""
    set_launcher_and_work_dir(cfg, args)
    cfg.load_from = args.checkpoint
    if args.show_dir is not None:
        enable_visualization(cfg, args.show_dir)
    if args.tta:
        enable_tta(cfg)
    apply_final_overrides(cfg, args)
    return cfg


# Per tool: how its command line is merged, and the data it reads.
TOOLS = dict(
    train=(merge_train_args, ('train_dataloader', 'val_dataloader')),
    test=(merge_test_args, ('test_dataloader', )))


def check_run_inputs(cfg, dataloaders, prog):
    """Stop the tool ``prog`` with one line naming the path when the data of
    ``dataloaders`` or the checkpoint to load cannot be read (an
    ``mmtnt://NAME`` checkpoint is downloaded now)."""
    try:
        check_data_paths(cfg, dataloaders)
    except FileNotFoundError as error:
        raise SystemExit(f'Error: {error}')
    try:
        prepare_checkpoint(checkpoint_to_load(cfg))
    except (CheckpointFileError, HubError) as error:
        raise SystemExit(f'{prog}: {error}')


def load_config(args):
    """The config the tool ``args.tool`` builds the runner from.

    The file is read by :func:`mmtnt.utils.cli.load_config`; the tool's
    options, then ``--cfg-options``, are merged in and the data and
    checkpoint checked (:func:`check_run_inputs`).

    Args:
        args (argparse.Namespace): From
            :func:`mmtnt.engine.cli.parse_train_args` or
            :func:`mmtnt.engine.cli.parse_test_args`.

    Raises:
        SystemExit: With one line, when the options do not suit the config
            or the device, or the data or checkpoint cannot be read.
    """
    merge, dataloaders = TOOLS[args.tool]
    prog = f'tools/{args.tool}.py'
    try:
        cfg = merge(read_config(args.config), args)
    except ValueError as error:
        raise SystemExit(f'{prog}: {error}')
    check_run_inputs(cfg, dataloaders, prog)
    return cfg


def build_runner(cfg):
    """Build the runner of a config from :func:`load_config`, setting up a
    CPU-only distributed run first and accelerating the model on the CPU.

    Args:
        cfg (Config): The full config.

    Returns:
        mmengine.runner.Runner: ``runner_type`` of the config, else
        mmengine's.
    """
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner

    from ..accel import accelerate_runner
    setup_cpu_distributed(cfg)
    if 'runner_type' in cfg:
        runner = RUNNERS.build(cfg)
    else:
        runner = Runner.from_cfg(cfg)
    accelerate_runner(runner)
    return runner


def build_dump_metric(cfg, out_file):
    """The task's metric that dumps every prediction to ``out_file``."""
    return METRICS.build(
        dict(type=DUMP_METRICS[get_task(cfg)], out_file_path=out_file))
