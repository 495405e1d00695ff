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

The options are in :mod:`mmtnt.engine.cli`, how they change the config in
:mod:`mmtnt.engine.runner_config`.
"""
import mmengine

from mmtnt.engine.cli import parse_test_args
from mmtnt.engine.runner_config import (build_dump_metric, build_runner,
                                        load_config)
from mmtnt.utils import shutdown_cpu_distributed


def main():
    args = parse_test_args()
    # Stops here, with one line, on missing data or an unreadable
    # checkpoint.
    cfg = load_config(args)
    dump_metric = None
    if args.out is not None and args.out_item == 'pred':
        dump_metric = build_dump_metric(cfg, args.out)

    runner = build_runner(cfg)
    if dump_metric is not None:
        runner.test_evaluator.metrics.append(dump_metric)
    metrics = runner.test()
    if args.out is not None and dump_metric is None and runner.rank == 0:
        mmengine.dump(metrics, args.out)
    shutdown_cpu_distributed()


if __name__ == '__main__':
    main()
