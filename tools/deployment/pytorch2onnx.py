"""Export an mmtnt classifier, segmentor or detector to ONNX, and check the
graph with ONNX Runtime.

The command line of :mod:`mmtnt.deploy`
(:func:`mmtnt.deploy.cli.export_main`): the export, verification and INT8
quantization are library functions
(``mmtnt.deploy.export_onnx``, ``verify_onnx``, ``quantize.quantize_onnx``),
documented in docs/inference.md.

Examples::

    python tools/deployment/pytorch2onnx.py \\
        configs/twins/twins-svt-small_8xb128_in1k.py svt-s.pth \\
        --output-file svt-s.onnx --shape 224 224 --dynamic-export --verify
    python tools/deployment/pytorch2onnx.py \\
        configs/twins/twins-svt-small_8xb128_in1k.py \\
        mmtnt://twins-svt-small_8xb128_in1k --output-file svt-s.onnx \\
        --shape 224 224 --verify
    python tools/deployment/pytorch2onnx.py \\
        configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py \\
        retinanet.pth --output-file retinanet.onnx --shape 128 128 \\
        --dynamic-export --verify --verify-image scene.jpg
"""
from mmtnt.deploy.cli import export_main

if __name__ == '__main__':
    export_main()
