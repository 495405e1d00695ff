"""Plot the curves of training runs and time their iterations, from the
scalar logs mmengine writes (``<work_dir>/<timestamp>/vis_data/
scalars.json``: one JSON object a line; training lines carry ``iter``,
validation lines only ``step``, the epoch or iteration they ran at).

A LOG argument is a ``scalars.json`` file or a work directory, whose latest
run that has one is read.

Examples::

    # loss and learning rate by iteration, validation accuracy by epoch
    # (or by iteration, for iteration-based runs)
    python tools/analysis_tools/analyze_logs.py plot_curve \\
        work_dirs/tnt-demo_1xb128_fashion-mnist \\
        --keys loss lr accuracy/top1 --out curves.png
    # a key logged in training and validation gets a panel for each:
    # 'time (train)' by iteration, 'time (val)' by epoch
    python tools/analysis_tools/analyze_logs.py plot_curve RUN_A \\
        --keys time --out time.png
    # two runs in one plot
    python tools/analysis_tools/analyze_logs.py plot_curve RUN_A RUN_B \\
        --keys mIoU --legend fp32 amp --out miou.png
    python tools/analysis_tools/analyze_logs.py cal_train_time RUN_A

The work is done by :mod:`mmtnt.analysis.logs`.
"""
from mmtnt.analysis.cli import analyze_logs as main

if __name__ == '__main__':
    main()
