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

The options are in :mod:`mmtnt.engine.cli`, how they change the config in
:mod:`mmtnt.engine.runner_config`.
"""
from mmtnt.engine.cli import parse_train_args
from mmtnt.engine.runner_config import build_runner, load_config
from mmtnt.utils import shutdown_cpu_distributed


def main():
    # Stops here, with one line, on missing data or an unreadable
    # checkpoint.
    cfg = load_config(parse_train_args())
    build_runner(cfg).train()
    shutdown_cpu_distributed()


if __name__ == '__main__':
    main()
