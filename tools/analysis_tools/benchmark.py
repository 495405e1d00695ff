"""Time mmtnt's backbones, measure their training memory, and compare them
with other implementations of the same architecture in one process.

A benchmark is a variant name (``--list`` shows them) or a config file,
whose ``model.backbone`` is wrapped into an ImageNet classifier and run on
one random batch: ``forward`` (images/s), ``train`` (ms per step) and
``memory`` (what one train step adds). ``--compare`` runs the timm,
mmpretrain and mmseg implementations too, in interleaved rounds; the
method is described in :mod:`mmtnt.analysis.benchmark`, which this command
line runs, and in docs/benchmarks.md.

Examples:
    python tools/analysis_tools/benchmark.py pcpvt-s svt-s --compare
    python tools/analysis_tools/benchmark.py tnt-s --modes memory \\
        --img-size 512 --batch-size 2 --compare [--with-cp]
    python tools/analysis_tools/benchmark.py \\
        configs/twins/twins-svt-s_8xb128_in1k.py --amp
    python tools/analysis_tools/benchmark.py tnt-s svt-s --amp-speedup
    python tools/analysis_tools/benchmark.py svt-s --profile mmtnt
    python tools/analysis_tools/benchmark.py --list
"""
from mmtnt.analysis.benchmark import main

if __name__ == '__main__':
    main()
