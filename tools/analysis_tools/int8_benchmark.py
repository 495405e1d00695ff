"""Accuracy and CPU speed of INT8 ONNX graphs against the fp32 graph and
the eager model; the work is done by :mod:`mmtnt.analysis.int8_benchmark`,
whose docstring says what is measured and how.

Examples (the embedded demos of docs/inference.md, their data where
``make_demo_scenes.py`` and ``prepare_fashion_mnist.py`` put it)::

    python tools/analysis_tools/int8_benchmark.py \\
        --accuracy configs/demo/tnt-demo_1xb128_fashion-mnist.py \\
            work_dirs/tnt-demo/epoch_4.pth \\
        --accuracy \\
            configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py \\
            work_dirs/upernet-demo/iter_2000.pth \\
        --accuracy \\
            configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py \\
            work_dirs/retinanet-demo/epoch_30.pth \\
        --metrics accuracy/top1 mIoU coco/bbox_mAP_50 --speed-configs
    python tools/analysis_tools/int8_benchmark.py \\
        --speed-configs configs/twins/twins-svt-small_8xb128_in1k.py
"""
from mmtnt.analysis.int8_benchmark import main

if __name__ == '__main__':
    main()
