"""Export classifiers to ONNX with dynamic axes, check them against PyTorch,
and time ONNX Runtime against mmtnt's eager forward on the CPU.

For each config (by default the twelve ImageNet configs of TNT, PyramidTNT
and Twins) the classifier is built with random weights (their values do
not change the timings) and exported by ``tools/deployment/pytorch2onnx.py``
(``torch.onnx.export(..., dynamo=True)``, batch, height and width dynamic)
at the config's test resolution, with the head's logits as output. Then:

- ``rel. diff``: ``max|onnx - torch| / max|torch|`` of the logits on random
  standard-normal input, at the export size and at a second size
  (``second_shape`` of the export tool: about 1.25x the height and 1.5x the
  width, odd, so that other paddings, masks and position resizings run),
  batch 2;
- times of one forward of a batch (``--batch-size``, default 8) at the
  export size with ``--threads`` threads (default 2): ONNX Runtime on the
  CPU (``intra_op_num_threads``, full graph optimisation), the plain mmtnt
  model, and the model after ``mmtnt.accelerate_for_cpu``, both in
  ``torch.inference_mode``. After ``--warmup`` runs of each, the three take
  turns for ``--rounds`` rounds, the order rotating every round, so that a
  change of machine load hits all of them alike; the table gives the
  median and, in brackets, the fastest and slowest run.

The table is printed in markdown. Machine-specific numbers belong in
docs/benchmarks.md, not in code.

Examples::

    python tools/analysis_tools/onnx_benchmark.py
    python tools/analysis_tools/onnx_benchmark.py \\
        configs/twins/twins-svt-small_8xb128_in1k.py --rounds 3
"""
import argparse
import copy
import gc
import os.path as osp
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
from mmengine.config import Config

from mmtnt.accel import accelerate_for_cpu

sys.path.insert(
    0, osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))),
                'deployment'))
import pytorch2onnx  # noqa: E402

#: The ImageNet configs measured by default.
IMAGENET_CONFIGS = [
    'configs/tnt/tnt-s-p16_16xb64_in1k.py',
    'configs/tnt/tnt-b-p16_16xb64_in1k.py',
    'configs/pyramid_tnt/pyramid-tnt-ti_8xb128_in1k-192px.py',
    'configs/pyramid_tnt/pyramid-tnt-s_8xb128_in1k-256px.py',
    'configs/pyramid_tnt/pyramid-tnt-m_8xb128_in1k-256px.py',
    'configs/pyramid_tnt/pyramid-tnt-b_8xb128_in1k-256px.py',
    'configs/twins/twins-pcpvt-small_8xb128_in1k.py',
    'configs/twins/twins-pcpvt-base_8xb128_in1k.py',
    'configs/twins/twins-pcpvt-large_16xb64_in1k.py',
    'configs/twins/twins-svt-small_8xb128_in1k.py',
    'configs/twins/twins-svt-base_8xb128_in1k.py',
    'configs/twins/twins-svt-large_16xb64_in1k.py',
]
#: The batch of the accuracy checks.
CHECK_BATCH = 2


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Export classifiers to ONNX, check them and time ONNX '
        'Runtime against the eager model on the CPU.')
    parser.add_argument(
        'configs',
        nargs='*',
        default=IMAGENET_CONFIGS,
        help='classification configs (default: the 12 ImageNet ones)')
    parser.add_argument(
        '--batch-size', type=int, default=8, help='images per timed batch')
    parser.add_argument(
        '--threads',
        type=int,
        default=2,
        help='threads of PyTorch and of ONNX Runtime')
    parser.add_argument(
        '--rounds', type=int, default=5, help='timed runs of each')
    parser.add_argument(
        '--warmup', type=int, default=1, help='untimed runs of each first')
    parser.add_argument(
        '--work-dir',
        help='where the ONNX files are written (default: a temporary '
        'folder, removed at the end)')
    return parser.parse_args(argv)


def test_input_size(cfg):
    """The square input size of the config's test pipeline: its
    ``CenterCrop`` (else 224).

    Args:
        cfg (Config): A classification config.

    Returns:
        tuple[int, int]: Height and width.
    """
    pipeline = cfg.get('test_dataloader', {}).get('dataset',
                                                  {}).get('pipeline', [])
    for transform in pipeline:
        if transform.get('type') == 'CenterCrop':
            size = transform['crop_size']
            return (size, size) if isinstance(size, int) else tuple(size)
    return 224, 224


def time_runs(runners, warmup, rounds):
    """Time callables taking turns.

    Args:
        runners (dict): Name -> a callable running one forward.
        warmup (int): Untimed calls of each first.
        rounds (int): Timed rounds; each runs every callable once, the
            order rotating by one every round.

    Returns:
        dict: Name -> list of the seconds of its timed calls.
    """
    names = list(runners)
    for name in names:
        for _ in range(warmup):
            runners[name]()
    times = {name: [] for name in names}
    for i in range(rounds):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            start = time.perf_counter()
            runners[name]()
            times[name].append(time.perf_counter() - start)
    return times


def format_times(seconds):
    """``median (min-max)`` in milliseconds."""
    ms = [s * 1e3 for s in seconds]
    return (f'{statistics.median(ms):.0f} '
            f'({min(ms):.0f}-{max(ms):.0f})')


def benchmark(config, args, work_dir):
    """Export, check and time one config.

    Returns:
        dict: The table's columns for the config.
    """
    row = dict(config=osp.splitext(osp.basename(config))[0])
    cfg = Config.fromfile(config)
    shape = test_input_size(cfg)
    row['size'] = f'{shape[0]}x{shape[1]}'
    torch.manual_seed(0)
    model = pytorch2onnx.build_model(cfg)
    graph = pytorch2onnx.export_graph(model, logits=True)
    onnx_file = osp.join(work_dir, row['config'] + '.onnx')
    start = time.perf_counter()
    try:
        pytorch2onnx.export_onnx(graph, onnx_file, shape, dynamic=True)
    except Exception as error:  # report it in the table, go on
        row['export'] = f'no: {type(error).__name__}'
        return row
    row['export'] = f'yes ({time.perf_counter() - start:.0f} s)'
    other = pytorch2onnx.second_shape(*shape)
    checks = [(CHECK_BATCH, *shape), (CHECK_BATCH, *other)]
    results = pytorch2onnx.verify_onnx(
        onnx_file, graph, checks, num_threads=args.threads)
    row['diff'] = ' / '.join(f'{r["relative"]:.1e}' for r in results)
    row['other'] = f'{other[0]}x{other[1]}'

    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        onnx_file, options, providers=['CPUExecutionProvider'])
    inputs = torch.randn(args.batch_size, 3, *shape)
    feed = {pytorch2onnx.INPUT_NAME: inputs.numpy()}
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


def markdown_table(rows, columns=COLUMNS):
    """The rows as a markdown table (missing cells as '-').

    Args:
        rows (list[dict]): Cells by key.
        columns (list[tuple[str, str]]): ``(key, title)`` of each column.
            Defaults to :data:`COLUMNS`.
    """
    lines = [
        '| ' + ' | '.join(title for _, title in columns) + ' |',
        '|' + '---|' * len(columns)
    ]
    for row in rows:
        lines.append('| ' + ' | '.join(
            str(row.get(key, '-')) for key, _ in columns) + ' |')
    return '\n'.join(lines)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    np.random.seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work_dir = args.work_dir or tmp
        for config in args.configs:
            row = benchmark(config, args, work_dir)
            rows.append(row)
            gc.collect()  # the model, its copy and the ONNX session
            print(markdown_table([row]).splitlines()[-1], flush=True)
    print(f'\nBatch {args.batch_size}, {args.threads} threads, median '
          f'(fastest-slowest) of {args.rounds} runs; rel. diff = '
          f'max|onnx - torch| / max|torch| of the logits, batch '
          f'{CHECK_BATCH}.\n')
    print(markdown_table(rows))


if __name__ == '__main__':
    main()
