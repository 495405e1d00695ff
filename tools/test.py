"""Test (and evaluate) a classifier, detector or segmentor.

The config's ``default_scope`` (``mmpretrain``, ``mmdet`` or ``mmseg``)
decides the task, and with it how ``--show-dir``, ``--tta`` and ``--out``
are put into the config.

Examples::

    python tools/test.py CONFIG CHECKPOINT
    python tools/test.py CONFIG CHECKPOINT --out preds.pkl --show-dir vis
    python tools/test.py CONFIG CHECKPOINT --out metrics.json \\
        --out-item metrics
    bash tools/dist_test.sh CONFIG CHECKPOINT 2
"""
import argparse
import copy
import os
import os.path as osp

import mmengine
from mmengine.config import Config, ConfigDict, DictAction
from mmengine.registry import METRICS, RUNNERS
from mmengine.runner import Runner

from mmtnt.accel import accelerate_runner
from mmtnt.hub import HubError, prepare_checkpoint
from mmtnt.utils import (CheckpointFileError, check_data_paths,
                         checkpoint_to_load, register_checkpoint_safe_globals,
                         setup_cpu_distributed, shutdown_cpu_distributed)

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


def parse_args():
    """Parse the command line; ``LOCAL_RANK`` is exported if unset."""
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
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, as key=value pairs; '
        'e.g. test_dataloader.batch_size=4')
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


def get_task(cfg):
    """Return the config's ``default_scope``, checked against ``TASKS``.

    Args:
        cfg (Config): The full config.

    Returns:
        str: ``'mmpretrain'``, ``'mmdet'`` or ``'mmseg'``.
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

    cfg.load_from = args.checkpoint

    if args.show_dir is not None:
        enable_visualization(cfg, args.show_dir)
    if args.tta:
        enable_tta(cfg)

    if args.no_cpu_accel:
        cfg.cpu_accel = False
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
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


def main():
    args = parse_args()
    cfg = merge_args(Config.fromfile(args.config), args)
    try:
        check_data_paths(cfg, ('test_dataloader', ))
    except FileNotFoundError as error:
        raise SystemExit(f'Error: {error}')
    try:
        prepare_checkpoint(checkpoint_to_load(cfg))
    except (CheckpointFileError, HubError) as error:
        raise SystemExit(f'tools/test.py: {error}')

    dump_metric = None
    if args.out is not None and args.out_item == 'pred':
        dump_metric = build_dump_metric(cfg, args.out)

    setup_cpu_distributed(cfg)
    register_checkpoint_safe_globals()
    if 'runner_type' in cfg:
        runner = RUNNERS.build(cfg)
    else:
        runner = Runner.from_cfg(cfg)
    # On the CPU: mmtnt.accelerate_for_cpu, unless switched off.
    accelerate_runner(runner)
    if dump_metric is not None:
        runner.test_evaluator.metrics.append(dump_metric)
    metrics = runner.test()
    if args.out is not None and dump_metric is None and runner.rank == 0:
        mmengine.dump(metrics, args.out)
    shutdown_cpu_distributed()


if __name__ == '__main__':
    main()
