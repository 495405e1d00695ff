"""Evaluate an ONNX graph (fp32 or INT8) of a classifier, segmentor or
detector on the test set of a config: ONNX Runtime on the CPU over the
config's test dataloader, scored by the config's own test evaluator, the
metrics printed as ``tools/test.py`` prints them.

The graph is one of ``tools/deployment/pytorch2onnx.py`` (or
``mmtnt.deploy.export_onnx``), maybe quantized (``--int8``); the config is
the one it was exported from, or one that inherits it with the data to
test on. The Python API is :func:`mmtnt.deploy.evaluate.evaluate_onnx`.

Examples::

    python tools/deployment/test.py \\
        configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py \\
        retinanet.onnx --threads 2
    python tools/deployment/test.py \\
        configs/custom_data/tnt-s-p16_1xb32-50e_custom-folder.py \\
        tnt_int8.onnx --cfg-options \\
        test_dataloader.dataset.data_root=data/my_set --work-dir work_dirs/int8
"""
from mmtnt.deploy.cli import evaluate_main

if __name__ == '__main__':
    evaluate_main()
