"""Time and memory of a Mask R-CNN exported to ONNX (ONNX Runtime, masks
per RoI pasted after the graph) against eager mmdet ``predict`` on the CPU,
each side in its own process, in interleaved rounds
(:mod:`mmtnt.deploy.mask_rcnn_benchmark`).

Usage::

    python tools/analysis_tools/mask_rcnn_onnx_benchmark.py \\
        configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py \\
        epoch_20.pth --shape 800 1333 --rounds 5 --threads 2 \\
        --image data/demo_scenes/coco/val
"""
from mmtnt.deploy.mask_rcnn_benchmark import main

if __name__ == '__main__':
    main()
