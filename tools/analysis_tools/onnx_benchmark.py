"""Export classifiers to ONNX with dynamic axes, check them against PyTorch,
and time ONNX Runtime against mmtnt's eager forward on the CPU.

For each config (by default the twelve ImageNet configs of TNT, PyramidTNT
and Twins) the classifier is built with random weights, exported by
:mod:`mmtnt.deploy` at the config's test resolution (logits as output),
checked at that size and a second one, and timed: ONNX Runtime, the plain
eager model and the model after ``mmtnt.accelerate_for_cpu``, in
interleaved rounds. The method is described in
:mod:`mmtnt.analysis.onnx_benchmark`, which this command line runs.

Examples::

    python tools/analysis_tools/onnx_benchmark.py
    python tools/analysis_tools/onnx_benchmark.py \\
        configs/twins/twins-svt-small_8xb128_in1k.py --rounds 3
"""
from mmtnt.analysis.onnx_benchmark import main

if __name__ == '__main__':
    main()
