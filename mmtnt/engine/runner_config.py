"""The config that ``tools/train.py`` and ``tools/test.py`` build the runner
from: the config file with the command line (:mod:`mmtnt.engine.cli`)
merged in, its data and checkpoint checked.

For ``tools/test.py`` the config's ``default_scope`` (``mmpretrain``,
``mmdet`` or ``mmseg``) decides the task, and with it how ``--show-dir``,
``--tta`` and ``--out`` are put into the config.

Examples:
    >>> args = parse_test_args(['configs/demo/tnt-demo_1xb128_fashion-'
    ...                         'mnist.py', 'epoch_4.pth', '--tta'])
    >>> cfg = merge_test_args(Config.fromfile(args.config), args)
    >>> cfg.model.type, cfg.load_from
    ('mmpretrain.AverageClsScoreTTA', 'epoch_4.pth')
    >>> cfg = load_config(args)  # merged, and epoch_4.pth checked
    Traceback (most recent call last):
    SystemExit: tools/test.py: cannot read checkpoint epoch_4.pth: ...
"""
import copy
import os.path as osp

from mmengine.config import Config, ConfigDict
from mmengine.registry import METRICS

from ..hub import HubError, prepare_checkpoint
from ..utils import (CheckpointFileError, check_data_paths,
                     checkpoint_to_load, setup_cpu_distributed)
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
    """Put ``--launcher`` and the work folder into ``cfg``: ``--work-dir``,
    else the config's ``work_dir``, else ``./work_dirs/<config name>``."""
    cfg.launcher = args.launcher
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])


def apply_final_overrides(cfg, args):
    """Apply the options that overrule everything else, last:
    ``--no-cpu-accel`` and ``--cfg-options``."""
    if args.no_cpu_accel:
        cfg.cpu_accel = False
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)


def merge_train_args(cfg, args):
    """Merge the command line of ``tools/train.py`` into the config.

    Args:
        cfg (Config): The config read from ``args.config``.
        args (argparse.Namespace): From
            :func:`mmtnt.engine.cli.parse_train_args`.

    Returns:
        Config: The updated config.

    Raises:
        ValueError: When ``--amp-dtype`` or the config's AMP dtype does not
            suit the device (:func:`mmtnt.engine.enable_amp`), or
            ``--auto-scale-lr`` finds no ``auto_scale_lr.base_batch_size``.

    Examples:
        >>> cfg = merge_train_args(Config.fromfile(args.config), args)
        >>> cfg.work_dir  # without --work-dir nor one in the config
        './work_dirs/tnt-demo_1xb128_fashion-mnist'
    """
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
    """The config's ``default_scope``; ValueError if not one of
    ``TASKS``."""
    task = cfg.get('default_scope')
    if task not in TASKS:
        raise ValueError(f'default_scope must be one of {TASKS} for '
                         f'tools/test.py, got {task!r}.')
    return task


def enable_visualization(cfg, show_dir):
    """Turn on the visualization hook, saving drawn images to ``show_dir``
    (made absolute: mmdet's hook reads a relative one from the work dir).

    Args:
        cfg (Config): The full config; changed in place.
        show_dir (str): Directory of the drawn images.

    Raises:
        ValueError: When the config has no ``visualization`` hook.
    """
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
    """Follow ``dataset`` keys of dataset wrappers to the wrapped dataset
    config (the same object, not a copy).

    Examples:
        >>> innermost_dataset(dict(type='RepeatDataset', times=2,
        ...                        dataset=dict(type='CocoDataset')))
        {'type': 'CocoDataset'}
    """
    while 'dataset' in dataset_cfg:
        dataset_cfg = dataset_cfg['dataset']
    return dataset_cfg


def enable_tta(cfg):
    """Wrap the model in the TTA model and use the TTA test pipeline.

    Without ``tta_pipeline`` in the config the test pipeline is used with its
    last transform (the packing one) run on the image flipped and as is;
    without ``tta_model``, ``DEFAULT_TTA_MODELS`` of the task.

    Args:
        cfg (Config): The full config; changed in place.

    Raises:
        ValueError: For a segmentation config without ``tta_model``.
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
    """Merge the command line of ``tools/test.py``
    (:func:`mmtnt.engine.cli.parse_test_args`) into ``cfg``, and return it;
    ValueError when ``--show-dir`` or ``--tta`` does not suit the config."""
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
    """Stop a tool before it builds the runner, with one line that names
    the path, when the data of ``dataloaders`` or the checkpoint the runner
    would load (:func:`mmtnt.utils.checkpoint_to_load`; an ``mmtnt://NAME``
    one is downloaded now) cannot be read.

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
    """
    try:
        check_data_paths(cfg, dataloaders)
    except FileNotFoundError as error:
        raise SystemExit(f'Error: {error}')
    try:
        prepare_checkpoint(checkpoint_to_load(cfg))
    except (CheckpointFileError, HubError) as error:
        raise SystemExit(f'{prog}: {error}')


def load_config(args):
    """The config the tool of ``args`` (``args.tool``: ``'train'`` or
    ``'test'``) builds the runner from: read, the command line merged in,
    the data it runs on and the checkpoint to load or resume from checked
    (:func:`check_run_inputs`).

    Args:
        args (argparse.Namespace): From
            :func:`mmtnt.engine.cli.parse_train_args` or
            :func:`mmtnt.engine.cli.parse_test_args`.

    Returns:
        Config: The config to build the runner from.

    Raises:
        SystemExit: With one line, when the arguments do not suit the
            config or the device, or the data or the checkpoint cannot be
            read.
    """
    merge, dataloaders = TOOLS[args.tool]
    prog = f'tools/{args.tool}.py'
    try:
        cfg = merge(Config.fromfile(args.config), args)
    except ValueError as error:
        raise SystemExit(f'{prog}: {error}')
    check_run_inputs(cfg, dataloaders, prog)
    return cfg


def build_runner(cfg):
    """Build the runner of a config from :func:`load_config`: a CPU-only
    distributed run set up first (:func:`mmtnt.utils.setup_cpu_distributed`),
    on the CPU the model accelerated (:func:`mmtnt.accel.accelerate_runner`).

    Args:
        cfg (Config): The full config.

    Returns:
        mmengine.runner.Runner: The runner (``runner_type`` of the config,
        else mmengine's).
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
    """Build the task's metric that dumps every prediction to ``out_file``
    (a ``.pkl`` file), to append to the test evaluator."""
    return METRICS.build(
        dict(type=DUMP_METRICS[get_task(cfg)], out_file_path=out_file))
