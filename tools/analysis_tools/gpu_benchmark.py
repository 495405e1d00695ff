"""The GPU tables of docs/benchmarks.md: every variant against its peers in
every precision, from one command.

For each variant and precision (``fp32``, ``tf32``, ``bf16``,
``bf16-compiled``) it measures the forward pass at ``--forward-batches``,
a train step at the config's per-GPU batch and the memory that step adds,
the implementations taking turns in rotating order; the method is
described in :mod:`mmtnt.analysis.gpu_benchmark`, which this command line
runs. With ``--out`` the tables are rewritten into a file after every
measurement; ``--time-budget`` leaves out what would start later.

Examples:
    python tools/analysis_tools/gpu_benchmark.py --device cuda \\
        --out gpu_tables.md --time-budget 420
    python tools/analysis_tools/gpu_benchmark.py svt-s tnt-s \\
        --precisions bf16 bf16-compiled --device cuda
    python tools/analysis_tools/gpu_benchmark.py svt-s --device cpu \\
        --img-size 64 --forward-batches 1 --train-batch 1 \\
        --precisions fp32 bf16 --rounds 2 --warmup 1
"""
from mmtnt.analysis.gpu_benchmark import main

if __name__ == '__main__':
    main()
