"""The command line of ``tools/test.py``: its options, and the config they
make (:func:`load_config`), checked before the runner is built.

The config's ``default_scope`` (``mmpretrain``, ``mmdet`` or ``mmseg``)
decides the task, and with it how ``--show-dir``, ``--tta`` and ``--out``
are put into the config.

Examples:
    >>> args = parse_args(['configs/demo/tnt-demo_1xb128_fashion-mnist.py',
    ...                    'epoch_4.pth', '--tta'])
    >>> cfg = merge_args(Config.fromfile(args.config), args)
    >>> cfg.model.type, cfg.load_from
    ('mmpretrain.AverageClsScoreTTA', 'epoch_4.pth')
    >>> cfg = load_config(args)  # merged, and epoch_4.pth checked
    Traceback (most recent call last):
    SystemExit: tools/test.py: cannot read checkpoint epoch_4.pth: ...
"""
import argparse
import copy
import os.path as osp

from mmengine.config import Config, ConfigDict
from mmengine.registry import METRICS

from .runner_cli import (add_runner_arguments, apply_final_overrides,
                         check_run_inputs, parse_runner_args,
                         set_launcher_and_work_dir)

PROG = 'tools/test.py'
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


def parse_args(argv=None):
    """Parse the command line of ``tools/test.py``; ``LOCAL_RANK`` is
    exported if unset.

    Args:
        argv (list[str], optional): Arguments instead of ``sys.argv``.

    Returns:
        argparse.Namespace: The parsed arguments.

    Examples:
        >>> parse_args(['cfg.py', 'ckpt.pth', '--out', 'preds.pkl']).out_item
        'pred'
    """
    parser = argparse.ArgumentParser(description='Test (and eval) a model')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--work-dir', help='the dir to save logs and evaluation metrics')
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
    return parse_runner_args(parser, argv)


def get_task(cfg):
    """Return the config's ``default_scope``, checked against ``TASKS``.

    Args:
        cfg (Config): The full config.

    Returns:
        str: ``'mmpretrain'``, ``'mmdet'`` or ``'mmseg'``.

    Raises:
        ValueError: For another scope.
    """
    task = cfg.get('default_scope')
    if task not in TASKS:
        raise ValueError(f'default_scope must be one of {TASKS} for '
                         f'tools/test.py, got {task!r}.')
    return task


def enable_visualization(cfg, show_dir):
    """Turn on the visualization hook, saving drawn images to ``show_dir``.

    ``show_dir`` is made absolute first: the tasks' hooks would otherwise
    read a relative one differently (mmdet's from ``work_dir/<timestamp>``,
    mmpretrain's from the current directory).

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
    """Follow ``dataset`` keys of dataset wrappers to the wrapped dataset.

    Args:
        dataset_cfg (dict): A dataset config.

    Returns:
        dict: The innermost dataset config (the same object, not a copy).

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


def merge_args(cfg, args):
    """Merge the command-line arguments into the config.

    Args:
        cfg (Config): The config read from ``args.config``.
        args (argparse.Namespace): The parsed arguments
            (:func:`parse_args`).

    Returns:
        Config: The updated config.

    Raises:
        ValueError: When ``--show-dir`` or ``--tta`` does not suit the
            config (:func:`enable_visualization`, :func:`enable_tta`).
    """
    set_launcher_and_work_dir(cfg, args)

    cfg.load_from = args.checkpoint

    if args.show_dir is not None:
        enable_visualization(cfg, args.show_dir)
    if args.tta:
        enable_tta(cfg)

    apply_final_overrides(cfg, args)
    return cfg


def load_config(args):
    """The config ``tools/test.py`` tests: read, the command line merged in
    (:func:`merge_args`), its test data and checkpoint checked
    (:func:`mmtnt.engine.runner_cli.check_run_inputs`).

    Args:
        args (argparse.Namespace): The parsed arguments
            (:func:`parse_args`).

    Returns:
        Config: The config to build the runner from.

    Raises:
        ValueError: When ``--show-dir`` or ``--tta`` does not suit the
            config.
        SystemExit: With one line, when the data or the checkpoint cannot
            be read.
    """
    cfg = merge_args(Config.fromfile(args.config), args)
    check_run_inputs(cfg, ('test_dataloader', ), PROG)
    return cfg


def build_dump_metric(cfg, out_file):
    """Build the task's metric that dumps every prediction to ``out_file``.

    Args:
        cfg (Config): The full config.
        out_file (str): A ``.pkl`` or ``.pickle`` file.

    Returns:
        BaseMetric: The dump metric, to append to the test evaluator.
    """
    return METRICS.build(
        dict(type=DUMP_METRICS[get_task(cfg)], out_file_path=out_file))
