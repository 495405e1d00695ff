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

The options and how they change the config are in
:mod:`mmtnt.engine.test_cli`.
"""
import mmengine
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from mmtnt.accel import accelerate_runner
from mmtnt.engine.test_cli import build_dump_metric, load_config, parse_args
from mmtnt.utils import (register_checkpoint_safe_globals,
                         setup_cpu_distributed, shutdown_cpu_distributed)


def main():
    args = parse_args()
    # The config with the command line merged in; stops here, with one
    # line, on missing data or an unreadable checkpoint.
    cfg = load_config(args)

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
