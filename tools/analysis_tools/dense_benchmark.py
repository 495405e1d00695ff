"""Time one train step of detectors and segmentors built from their
configs, at their training sizes, measure its peak memory, and estimate
the GPU-hours of the config's schedule.

A benchmark is a config: an mmdet detector or an mmseg segmentor, a file
of mmtnt's or another package's config named with mmengine's prefix
(``mmseg::twins/...``), which then runs beside mmtnt's as a peer. Each
model trains on one random batch with synthetic but valid targets; the
configs take turns in interleaved rounds. The method is described in
:mod:`mmtnt.analysis.dense` and :mod:`mmtnt.analysis.dense_benchmark`,
which this command line runs.

Examples:
    python tools/analysis_tools/dense_benchmark.py \\
        configs/twins/mask-rcnn_twins-svt-s_fpn_1x_coco.py \\
        configs/tnt/mask-rcnn_tnt-s-p16_fpn_1x_coco.py \\
        --device cuda --with-cp both
    python tools/analysis_tools/dense_benchmark.py \\
        configs/twins/upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py \\
        mmseg::twins/twins_svt-s_uperhead_8xb2-160k_ade20k-512x512.py \\
        --device cuda --amp --out work_dirs/dense_benchmark.md
    python tools/analysis_tools/dense_benchmark.py \\
        configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py \\
        --img-size 128 --batch-size 2 --modes train
"""
from mmtnt.analysis.dense_benchmark import main

if __name__ == '__main__':
    main()
