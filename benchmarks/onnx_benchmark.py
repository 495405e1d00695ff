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
- times of one forward of a batch (``--batch-size``, default 8; a row for
  each of several) at the export size (``--shape``, default the config's)
  with ``--threads`` threads (default 2) in each of
  ``--runtimes`` (default ONNX Runtime float32; OpenVINO at ``fp32``,
  ``bf16`` or ``int8`` too, :func:`mmtnt.deploy.cpu_session`), and, unless
  ``--no-eager``, the plain mmtnt model and the model after
  ``mmtnt.accelerate_for_cpu``, both in ``torch.inference_mode``. After
  ``--warmup`` runs of each, all take turns for ``--rounds`` rounds, the
  order rotating every round, so that a change of machine load hits all
  of them alike (:func:`benchmarks.measure.time_runs`); ONNX Runtime's
  threads do not spin between runs (``cpu_session(..., spinning=False)``),
  or the runtime after it would wait for cores they hold; the table gives
  the median and, in brackets, the fastest and slowest run, and each
  runtime's speed-up over the first runtime as the median (range) of the
  per-round ratios (:func:`benchmarks.measure.ratio_cell`). With
  ``--fixed-shape`` every runtime is timed in sessions fixed to the batch's
  shape (``cpu_session(..., input_shape=...)``), as a deployment with one
  input size runs them.
- ``rel. diff`` is given for each runtime (bf16's: its largest error over
  the largest logit).

Examples::

    python -m benchmarks.onnx_benchmark
    python -m benchmarks.onnx_benchmark \\
        configs/twins/twins-svt-small_8xb128_in1k.py --rounds 3
    python -m benchmarks.onnx_benchmark --no-eager --batch-size 1 \\
        --runtimes onnxruntime:fp32 openvino:fp32 openvino:bf16
"""
import argparse
import copy
import gc
import os.path as osp
import statistics
import tempfile
import time
from functools import partial

import numpy as np
import torch

from mmtnt.accel import accelerate_for_cpu
from mmtnt.analysis import default_shape, format_table, load_config
from mmtnt.deploy import (BACKENDS, INPUT_NAME, PRECISIONS, build_model,
                          cpu_session, export_graph, export_onnx,
                          input_channels, second_shape)
from mmtnt.deploy.verify import relative_difference
from .measure import format_times, ratio_cell, time_runs
from .options import add_timing_options
from .variants import variants

#: The batch of the accuracy checks.
CHECK_BATCH = 2
#: How the table names each backend.
BACKEND_LABELS = dict(onnxruntime='ORT', openvino='OpenVINO')


def runtime_label(runtime):
    """``'OpenVINO bf16'`` for ``'openvino:bf16'``."""
    backend, precision = runtime.split(':')
    return f'{BACKEND_LABELS[backend]} {precision}'


def columns(runtimes, eager=True):
    """The columns of the table: (row key, title).

    Args:
        runtimes (list[str]): ``BACKEND:PRECISION`` of each runtime timed,
            the first the others are compared with.
        eager (bool): Whether the eager models are timed too.

    Returns:
        list[tuple[str, str]]: The columns.

    Examples:
        >>> [title for _, title in columns(['onnxruntime:fp32'],
        ...                                eager=False)][4:]
        ['rel. diff ORT fp32 export / second size', 'batch', 'ORT fp32 ms']
    """
    first = runtime_label(runtimes[0])
    found = [('config', 'config'), ('size', 'export size'),
             ('export', 'exports'), ('other', 'second size')]
    found += [(f'diff {runtime}',
               f'rel. diff {runtime_label(runtime)} export / second size')
              for runtime in runtimes]
    found += [('batch', 'batch')]
    found += [(runtime, f'{runtime_label(runtime)} ms')
              for runtime in runtimes]
    found += [(f'ratio {runtime}', f'{first} / {runtime_label(runtime)}')
              for runtime in runtimes[1:]]
    if eager:
        found += [('plain', 'eager ms'), ('accel', 'eager + accel ms'),
                  ('speedup', f'eager / {first}, accel / {first}')]
    return found


def benchmark_config(config, args, work_dir):
    """Export, check and time one config.

    Args:
        config (str): A classification config file.
        args (argparse.Namespace): From :func:`parse_args`.
        work_dir (str): Where the ONNX file is written.

    Returns:
        list[dict]: The table's cells for the config, a row per
        ``--batch-size``, by the keys of :func:`columns` (an export that
        fails ends its one row after ``export``).
    """
    row = dict(config=osp.splitext(osp.basename(config))[0])
    cfg = load_config(config)
    shape = tuple(args.shape or default_shape(cfg)[0])
    row['size'] = f'{shape[0]}x{shape[1]}'
    torch.manual_seed(0)
    graph = export_graph(build_model(cfg), logits=True)
    onnx_file = osp.join(work_dir, row['config'] + '.onnx')
    start = time.perf_counter()
    try:
        export_onnx(graph, onnx_file, shape, dynamic=True)
    except Exception as error:  # report it in the table, go on
        row['export'] = f'no: {type(error).__name__}'
        return [row]
    row['export'] = f'yes ({time.perf_counter() - start:.0f} s)'
    other = second_shape(*shape)
    row['other'] = f'{other[0]}x{other[1]}'
    sessions = open_sessions(onnx_file, args)
    channels = input_channels(graph)
    generator = torch.Generator().manual_seed(0)
    checks = [
        torch.randn(CHECK_BATCH, channels, *size, generator=generator)
        for size in (shape, other)
    ]
    for runtime, session in sessions.items():
        row[f'diff {runtime}'] = ' / '.join(
            f'{difference:.1e}'
            for difference in relative_differences(session, graph, checks))
    accelerated = (accelerate_for_cpu(copy.deepcopy(graph))
                   if args.eager else None)
    rows = []
    for batch in args.batch_size:
        inputs = torch.randn(batch, channels, *shape)
        if args.fixed_shape:
            sessions = open_sessions(onnx_file, args, tuple(inputs.shape))
        rows.append(dict(row, batch=batch, **time_batch(
            inputs, sessions, graph, accelerated, args)))
    return rows


def open_sessions(onnx_file, args, input_shape=None):
    """A session of each of ``--runtimes`` on ``onnx_file``, by its
    ``BACKEND:PRECISION``, fixed to ``input_shape`` if given."""
    return {
        runtime: cpu_session(onnx_file, args.threads, spinning=False,
                             input_shape=input_shape,
                             **dict(zip(('backend', 'precision'),
                                        runtime.split(':'))))
        for runtime in args.runtimes
    }


def time_batch(inputs, sessions, graph, accelerated, args):
    """Time each runtime's session (and the eager models, unless
    ``accelerated`` is None) on one batch in interleaved rounds.

    Returns:
        dict: The times and ratios of a row of the table.
    """
    feed = {INPUT_NAME: inputs.numpy()}
    runners = {
        runtime: partial(session.run, None, feed)
        for runtime, session in sessions.items()
    }
    if accelerated is not None:
        runners.update(plain=eager_runner(graph, inputs),
                       accel=eager_runner(accelerated, inputs))
    times = time_runs(runners, warmup=args.warmup, rounds=args.rounds)
    cells = {name: format_times(seconds) for name, seconds in times.items()}
    first = times[args.runtimes[0]]
    for runtime in args.runtimes[1:]:
        cells[f'ratio {runtime}'] = ratio_cell(first, times[runtime], True)
    if accelerated is not None:
        reference = statistics.median(first)
        cells['speedup'] = ' / '.join(
            f'{statistics.median(times[name]) / reference:.2f}'
            for name in ('plain', 'accel'))
    return cells


def relative_differences(session, graph, checks):
    """``max|runtime - torch| / max|torch|`` of the logits of each input of
    ``checks`` (tensors)."""
    differences = []
    for inputs in checks:
        with torch.no_grad():
            expected = graph(inputs).numpy()
        actual = session.run(None, {INPUT_NAME: inputs.numpy()})[0]
        differences.append(relative_difference(actual, expected))
    return differences


def eager_runner(module, inputs):
    """A callable running ``module`` on ``inputs`` once, in inference
    mode."""

    def run():
        with torch.inference_mode():
            module(inputs)

    return run


def parse_runtime(text):
    """``BACKEND:PRECISION`` of ``--runtimes``, checked.

    Examples:
        >>> parse_runtime('openvino:bf16')
        'openvino:bf16'
    """
    backend, _, precision = text.partition(':')
    if backend not in BACKENDS or precision not in PRECISIONS:
        raise argparse.ArgumentTypeError(
            f'{text!r}: BACKEND:PRECISION, BACKEND one of '
            f'{", ".join(BACKENDS)}, PRECISION one of '
            f'{", ".join(PRECISIONS)}')
    return text


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
        '--batch-size',
        type=int,
        nargs='+',
        default=[8],
        help='images per timed batch: a row for each (default 8)')
    parser.add_argument(
        '--shape',
        type=int,
        nargs=2,
        metavar=('H', 'W'),
        help='the export and timing size (default: each config\'s test '
        'size)')
    parser.add_argument(
        '--threads',
        type=int,
        default=2,
        help='threads of PyTorch and of each runtime')
    parser.add_argument(
        '--runtimes',
        type=parse_runtime,
        nargs='+',
        default=['onnxruntime:fp32'],
        metavar='BACKEND:PRECISION',
        help='the runtimes timed, the first the others are compared with '
        '(default onnxruntime:fp32), e.g. onnxruntime:fp32 openvino:fp32 '
        'openvino:bf16')
    parser.add_argument(
        '--fixed-shape',
        action='store_true',
        help='time sessions fixed to each batch\'s shape (cpu_session\'s '
        'input_shape) instead of the dynamic ones that are checked')
    parser.add_argument(
        '--no-eager',
        dest='eager',
        action='store_false',
        help='time the runtimes only, not the eager models')
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
    table = columns(args.runtimes, args.eager)
    with tempfile.TemporaryDirectory() as tmp:
        work_dir = args.work_dir or tmp
        for config in args.configs:
            found = benchmark_config(config, args, work_dir)
            rows += found
            gc.collect()  # the model, its copy and the sessions
            print('\n'.join(format_table(table, found).splitlines()[2:]),
                  flush=True)
    print(f'\n{args.threads} threads, median (fastest-slowest) of '
          f'{args.rounds} interleaved runs, ratios: median (range) of the '
          'per-round ratios; rel. diff = max|runtime - torch| / max|torch| '
          f'of the logits, batch {CHECK_BATCH}.\n')
    print(format_table(table, rows))


if __name__ == '__main__':
    main()
