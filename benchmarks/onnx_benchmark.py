"""Export classifiers to ONNX with dynamic axes, check them against PyTorch,
and time ONNX Runtime against mmtnt's eager forward on the CPU
(``python -m benchmarks.onnx_benchmark``).

For each config (by default those of the ImageNet variants of the model
index, :func:`benchmarks.variants.variants`) the classifier is built with
random weights (their values do not change the timings) and exported by
:mod:`mmtnt.deploy`
(``torch.onnx.export(..., dynamo=True)``, batch, height and width dynamic)
at the config's test resolution, with the head's logits as output. Then:

- ``rel. diff``: ``max|onnx - torch| / max|torch|`` of the logits on random
  standard-normal input, at the export size and at a second size
  (:func:`mmtnt.deploy.second_shape`: about 1.25x the height and 1.5x the
  width, odd, so that other paddings, masks and position resizings run),
  batch 2;
- times of one forward of a batch (``--batch-size``, default 8) at the
  export size with ``--threads`` threads (default 2): ONNX Runtime on the
  CPU (``intra_op_num_threads``, full graph optimisation), the plain mmtnt
  model, and the model after ``mmtnt.accelerate_for_cpu``, both in
  ``torch.inference_mode``. After ``--warmup`` runs of each, the three take
  turns for ``--rounds`` rounds, the order rotating every round, so that a
  change of machine load hits all of them alike
  (:func:`benchmarks.measure.time_runs`); the table gives the median
  and, in brackets, the fastest and slowest run.

Examples::

    python -m benchmarks.onnx_benchmark
    python -m benchmarks.onnx_benchmark \\
        configs/twins/twins-svt-small_8xb128_in1k.py --rounds 3
"""
import argparse
import copy
import gc
import os.path as osp
import statistics
import tempfile
import time

import numpy as np
import torch

from mmtnt.accel import accelerate_for_cpu
from mmtnt.analysis import default_shape, format_table, load_config
from mmtnt.deploy import (INPUT_NAME, build_model, cpu_session, export_graph,
                          export_onnx, second_shape, verify_onnx)
from .measure import format_times, time_runs
from .options import add_timing_options
from .variants import variants

#: The batch of the accuracy checks.
CHECK_BATCH = 2
#: The columns of the table: (row key, title).
COLUMNS = [
    ('config', 'config'),
    ('size', 'export size'),
    ('export', 'exports'),
    ('other', 'second size'),
    ('diff', 'rel. diff export / second size'),
    ('onnx', 'ONNX Runtime ms'),
    ('plain', 'eager ms'),
    ('accel', 'eager + accel ms'),
    ('speedup', 'eager / ORT, accel / ORT'),
]


def benchmark_config(config, args, work_dir):
    """Export, check and time one config.

    Args:
        config (str): A classification config file.
        args (argparse.Namespace): From :func:`parse_args`.
        work_dir (str): Where the ONNX file is written.

    Returns:
        dict: The table's cells for the config, by the keys of
        :data:`COLUMNS` (an export that fails ends the row after
        ``export``).
    """
    row = dict(config=osp.splitext(osp.basename(config))[0])
    cfg = load_config(config)
    shape = default_shape(cfg)[0]
    row['size'] = f'{shape[0]}x{shape[1]}'
    torch.manual_seed(0)
    graph = export_graph(build_model(cfg), logits=True)
    onnx_file = osp.join(work_dir, row['config'] + '.onnx')
    start = time.perf_counter()
    try:
        export_onnx(graph, onnx_file, shape, dynamic=True)
    except Exception as error:  # report it in the table, go on
        row['export'] = f'no: {type(error).__name__}'
        return row
    row['export'] = f'yes ({time.perf_counter() - start:.0f} s)'
    other = second_shape(*shape)
    checks = [(CHECK_BATCH, *shape), (CHECK_BATCH, *other)]
    results = verify_onnx(onnx_file, graph, checks, num_threads=args.threads)
    row['diff'] = ' / '.join(f'{r["relative"]:.1e}' for r in results)
    row['other'] = f'{other[0]}x{other[1]}'

    session = cpu_session(onnx_file, num_threads=args.threads)
    inputs = torch.randn(args.batch_size, 3, *shape)
    feed = {INPUT_NAME: inputs.numpy()}
    accelerated = accelerate_for_cpu(copy.deepcopy(graph))

    def eager(module):

        def run():
            with torch.inference_mode():
                module(inputs)

        return run

    times = time_runs(
        dict(
            onnx=lambda: session.run(None, feed),
            plain=eager(graph),
            accel=eager(accelerated)),
        warmup=args.warmup,
        rounds=args.rounds)
    for name, seconds in times.items():
        row[name] = format_times(seconds)
    median = {name: statistics.median(s) for name, s in times.items()}
    row['speedup'] = (f'{median["plain"] / median["onnx"]:.2f} / '
                      f'{median["accel"] / median["onnx"]:.2f}')
    return row


def parse_args(argv=None):
    """The options of ``python -m benchmarks.onnx_benchmark``.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Returns:
        argparse.Namespace: The options.
    """
    parser = argparse.ArgumentParser(
        description='Export classifiers to ONNX, check them and time ONNX '
        'Runtime against the eager model on the CPU.')
    parser.add_argument(
        'configs',
        nargs='*',
        help='classification configs (default: those of the ImageNet '
        'variants)')
    parser.add_argument(
        '--batch-size', type=int, default=8, help='images per timed batch')
    parser.add_argument(
        '--threads',
        type=int,
        default=2,
        help='threads of PyTorch and of ONNX Runtime')
    add_timing_options(parser, warmup=1, rounds=5)
    parser.add_argument(
        '--work-dir',
        help='where the ONNX files are written (default: a temporary '
        'folder, removed at the end)')
    args = parser.parse_args(argv)
    args.configs = args.configs or [v['config'] for v in variants().values()]
    return args


def main(argv=None):
    """Print a row per config as it is measured, then the whole table.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.
    """
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    np.random.seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work_dir = args.work_dir or tmp
        for config in args.configs:
            row = benchmark_config(config, args, work_dir)
            rows.append(row)
            gc.collect()  # the model, its copy and the ONNX session
            print(format_table(COLUMNS, [row]).splitlines()[-1],
                  flush=True)
    print(f'\nBatch {args.batch_size}, {args.threads} threads, median '
          f'(fastest-slowest) of {args.rounds} runs; rel. diff = '
          f'max|onnx - torch| / max|torch| of the logits, batch '
          f'{CHECK_BATCH}.\n')
    print(format_table(COLUMNS, rows))


if __name__ == '__main__':
    main()
