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

The options and how they change the config are in
:mod:`mmtnt.engine.train_cli`.
"""
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from mmtnt.accel import accelerate_runner
from mmtnt.engine.train_cli import load_config, parse_args
from mmtnt.utils import (register_checkpoint_safe_globals,
                         setup_cpu_distributed, shutdown_cpu_distributed)


def main():
    args = parse_args()
    # The config with the command line merged in; stops here, with one
    # line, on missing data or an unreadable checkpoint.
    cfg = load_config(args)

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
