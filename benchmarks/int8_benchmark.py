"""Accuracy and CPU speed of INT8 ONNX graphs (``mmtnt.deploy.quantize``)
against the fp32 graph and the eager model
(``python -m benchmarks.int8_benchmark``).

Accuracy (``--accuracy CONFIG CHECKPOINT``, repeatable; any classifier,
segmentor or detector config): the model is exported to ONNX with dynamic
axes (``mmtnt.deploy.export_onnx``; classifiers with the logits as
output), quantized in both modes (the static mode calibrated on
``--calibration-images`` training images through the test pipeline, so
apart from the evaluated ones), and the fp32, dynamic and static graphs
are scored on the same test images by the config's own evaluator
(``mmtnt.deploy.evaluate.evaluate_graphs``, what
``tools/deployment/test.py`` runs). ``--cfg-options`` apply to every
config (the data paths, say); ``--test-images`` limits each test set to
its first images; ``--metrics`` picks the metrics in the table (by
default every scalar metric of each evaluator).

Speed (``--speed-configs``, by default the S-size ImageNet variants of
the model index, random weights; calibrated on two
random standard-normal images, which do not change the timings): one
forward of a batch of each ``--batch-sizes`` at the config's test size with
``--threads`` threads, for ONNX Runtime fp32, dynamic INT8 and static INT8
and for the eager model with ``mmtnt.accelerate_for_cpu`` in
``torch.inference_mode``. They take turns for ``--rounds`` rounds after
``--warmup`` runs, the order rotating every round
(:func:`benchmarks.measure.time_runs`); the table gives median milliseconds
(fastest-slowest) and the speed-ups as the median (lowest-highest) of the
per-round ratios, so that load changing between rounds cancels.

``--openvino`` adds OpenVINO's INT8 model of NNCF
(``mmtnt.deploy.quantize_openvino``, calibrated on the same images, its IR
next to the fp32 graph) to both: scored by the same evaluator, and timed in
the same interleaved rounds (OpenVINO with ``--threads`` threads).
``--fixed-shape`` times every graph in sessions fixed to the batch's shape
(``cpu_session(..., input_shape=...)``), as ``onnx_benchmark`` does.

The INT8 graphs store 7-bit weights (``quantize_onnx``'s default
``reduce_range=True``, which no x86-64 CPU saturates); ``--full-range``
adds graphs with the full 8-bit weights (``dynamic-8bit``,
``static-8bit``), the fastest setting, to compare their accuracy and
speed on the machine at hand. The CPU's integer instruction sets (AVX2,
AVX-512, VNNI) are printed with the tables: 8-bit weights saturate on
CPUs with AVX2 and no VNNI.

Examples (the embedded demos of docs/inference.md, their data where
``make_demo_scenes.py`` and ``prepare_fashion_mnist.py`` put it)::

    python -m benchmarks.int8_benchmark \\
        --accuracy configs/demo/tnt-demo_1xb128_fashion-mnist.py \\
            work_dirs/tnt-demo/epoch_4.pth \\
        --accuracy \\
            configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py \\
            work_dirs/upernet-demo/iter_2000.pth \\
        --accuracy \\
            configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py \\
            work_dirs/retinanet-demo/epoch_30.pth \\
        --metrics accuracy/top1 mIoU coco/bbox_mAP_50 --speed-configs
    python -m benchmarks.int8_benchmark \\
        --speed-configs configs/twins/twins-svt-small_8xb128_in1k.py
    python -m benchmarks.int8_benchmark --openvino --rounds 7
"""
import argparse
import copy
import gc
import os.path as osp
import tempfile

import numpy as np
import torch
from mmengine.config import DictAction

from mmtnt.accel import accelerate_for_cpu
from mmtnt.analysis import default_shape, format_table, load_config
from mmtnt.deploy import (INPUT_NAME, MIN_DYNAMIC_TRACE_SIZE, build_model,
                          cpu_session, export_graph, export_onnx)
from mmtnt.deploy.evaluate import evaluate_graphs
from mmtnt.deploy.quantize import (MODES, calibration_inputs,
                                   cpu_int8_features, quantize_onnx)
from mmtnt.deploy.quantize_openvino import quantize_openvino
from .measure import format_times, ratio_cell, time_runs
from .options import add_timing_options
from .variants import variants

#: The suffix of the graphs with 8-bit weights (``--full-range``).
FULL_RANGE = '-8bit'
#: The timed name of OpenVINO's INT8 model (``--openvino``).
OPENVINO = 'openvino'


def parse_args(argv=None):
    """The options of ``python -m benchmarks.int8_benchmark``.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Returns:
        argparse.Namespace: ``speed_configs`` filled in by default.
    """
    parser = argparse.ArgumentParser(
        description='Accuracy and CPU speed of INT8 ONNX graphs.')
    parser.add_argument(
        '--accuracy',
        nargs=2,
        action='append',
        default=[],
        metavar=('CONFIG', 'CHECKPOINT'),
        help='a config and its checkpoint: export, quantize and score the '
        'graphs on its test set (repeatable)')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='settings merged into every --accuracy config, as key=value '
        'pairs')
    parser.add_argument(
        '--metrics',
        nargs='+',
        help='the metrics in the accuracy table (default: every scalar '
        'metric of each evaluator)')
    parser.add_argument(
        '--calibration-images',
        type=int,
        default=64,
        help='training images that calibrate the static mode')
    parser.add_argument(
        '--test-images',
        type=int,
        help='the first N test images of each config (default: all)')
    parser.add_argument(
        '--speed-configs',
        nargs='*',
        help='classification configs to time (default: those of the S-size '
        'variants; none: no timing)')
    parser.add_argument(
        '--batch-sizes',
        type=int,
        nargs='+',
        default=[1, 8],
        help='batches timed')
    parser.add_argument(
        '--threads', type=int, default=2, help='threads of ORT and torch')
    add_timing_options(parser, warmup=2, rounds=9)
    parser.add_argument(
        '--full-range',
        action='store_true',
        help='also quantize with 8-bit weights (reduce_range=False): the '
        'dynamic-8bit and static-8bit graphs')
    parser.add_argument(
        '--openvino',
        action='store_true',
        help='also time the OpenVINO INT8 model of NNCF '
        '(mmtnt.deploy.quantize_openvino), calibrated on the same images')
    parser.add_argument(
        '--fixed-shape',
        action='store_true',
        help='time sessions fixed to each batch\'s shape (cpu_session\'s '
        'input_shape)')
    parser.add_argument(
        '--work-dir',
        help='where the ONNX files are written (default: a temporary '
        'folder, removed at the end)')
    args = parser.parse_args(argv)
    if args.speed_configs is None:
        args.speed_configs = [
            variant['config'] for name, variant in variants().items()
            if name.endswith('-s')
        ]
    return args


def int8_graphs(full_range=False, openvino=False):
    """The names of the INT8 graphs: each mode (7-bit weights), then with
    ``full_range`` each mode with 8-bit weights (``FULL_RANGE``), then with
    ``openvino`` OpenVINO's model (``OPENVINO``)."""
    return list(MODES) + ([m + FULL_RANGE for m in MODES] if full_range
                          else []) + ([OPENVINO] if openvino else [])


def quantized_files(fp32, calibration, prefix, full_range=False,
                    openvino=False):
    """Quantize ``fp32`` into each of :func:`int8_graphs`; name -> file,
    fp32 included, or for OpenVINO -> ``(fp32, 'openvino', 'int8')``, the
    IR written next to ``fp32`` (as :func:`evaluate_graphs` takes it)."""
    files = dict(fp32=fp32)
    if openvino:
        quantize_openvino(fp32, calibration)
        files[OPENVINO] = (fp32, 'openvino', 'int8')
    for name in int8_graphs(full_range):
        files[name] = f'{prefix}-int8-{name}.onnx'
        quantize_onnx(
            fp32,
            files[name],
            name.replace(FULL_RANGE, ''),
            calibration=calibration,
            reduce_range=not name.endswith(FULL_RANGE))
    return files


def config_name(config):
    """A config file's name without folder and extension."""
    return osp.splitext(osp.basename(config))[0]


def accuracy_rows(config, checkpoint, args, work_dir):
    """Export, quantize and evaluate one config.

    Returns:
        list[dict]: The table's rows, one per metric: ``config``,
        ``metric``, the value of each graph and its change from fp32 in
        each INT8 graph.
    """
    cfg = load_config(config, args.cfg_options)
    name = config_name(config)
    fp32 = osp.join(work_dir, f'{name}.onnx')
    export_onnx(
        build_model(cfg, checkpoint),
        fp32, (MIN_DYNAMIC_TRACE_SIZE, ) * 2,
        dynamic=True,
        logits=True)
    calibration = calibration_inputs(
        cfg, args.calibration_images, split='train')
    files = quantized_files(fp32, calibration, osp.join(work_dir, name),
                            args.full_range, args.openvino)
    metrics = evaluate_graphs(cfg, files, args.threads,
                              num_images=args.test_images)
    keys = [
        key for key, value in metrics['fp32'].items()
        if np.size(value) == 1 and (not args.metrics or key in args.metrics)
    ]
    if not keys:
        raise SystemExit(
            f'none of --metrics {args.metrics} among the '
            f'metrics of {config}: {list(metrics["fp32"])}.')
    return [
        metric_row(name, key, metrics, int8_graphs(args.full_range,
                                                   args.openvino))
        for key in keys
    ]


def metric_row(name, key, metrics, graphs):
    """The accuracy table's row of one metric: each graph's value and the
    INT8 graphs' changes from fp32 (3 decimals for metrics within 0-1,
    else 2)."""
    values = {graph: float(m[key]) for graph, m in metrics.items()}
    digits = 3 if abs(values['fp32']) <= 1 else 2
    row = dict(config=name, metric=key)
    for graph, value in values.items():
        row[graph] = f'{value:.{digits}f}'
    for graph in graphs:
        row[f'{graph}_change'] = (
            f'{values[graph] - values["fp32"]:+.{digits}f}')
    return row


def speed_rows(config, args, work_dir):
    """Export, quantize and time one classification config at each batch
    size.

    Returns:
        list[dict]: The table's rows.
    """
    cfg = load_config(config)
    name = config_name(config)
    shape = default_shape(cfg)[0]
    torch.manual_seed(0)
    graph = export_graph(build_model(cfg), logits=True)
    fp32 = osp.join(work_dir, name + '.onnx')
    export_onnx(graph, fp32, shape, dynamic=True)
    rng = np.random.default_rng(0)
    calibration = [
        rng.standard_normal((1, 3, *shape), dtype=np.float32)
        for _ in range(2)
    ]
    files = quantized_files(fp32, calibration, osp.join(work_dir, name),
                            args.full_range, args.openvino)
    sessions = None if args.fixed_shape else open_sessions(files, args)
    accelerated = accelerate_for_cpu(copy.deepcopy(graph))
    rows = []
    for batch in args.batch_sizes:
        inputs = torch.randn(batch, 3, *shape)
        feed = {INPUT_NAME: inputs.numpy()}
        if args.fixed_shape:
            sessions = open_sessions(files, args, tuple(inputs.shape))

        def eager():
            with torch.inference_mode():
                accelerated(inputs)

        runners = {
            key: (lambda session=session: session.run(None, feed))
            for key, session in sessions.items()
        }
        runners['eager'] = eager
        times = time_runs(runners, args.warmup, args.rounds)
        row = dict(config=name, batch=batch)
        for key, seconds in times.items():
            row[key] = format_times(seconds)
        for int8 in int8_graphs(args.full_range, args.openvino):
            row[f'{int8}_fp32'] = ratio_cell(times['fp32'], times[int8],
                                             True)
            row[f'{int8}_eager'] = ratio_cell(times['eager'], times[int8],
                                              True)
        rows.append(row)
    return rows


def open_sessions(files, args, input_shape=None):
    """A CPU session of each file of :func:`quantized_files` (an ONNX file,
    run in ONNX Runtime, or ``(onnx_file, backend, precision)``), by its
    name, fixed to ``input_shape`` if given."""
    sessions = {}
    for name, run in files.items():
        onnx_file, backend, precision = ((run, 'onnxruntime', 'fp32')
                                         if isinstance(run, str) else run)
        sessions[name] = cpu_session(
            onnx_file, args.threads, backend=backend, precision=precision,
            spinning=False, input_shape=input_shape)
    return sessions


def accuracy_columns(graphs):
    """The accuracy table's (key, title) columns of the INT8 ``graphs``."""
    return ([('config', 'config'), ('metric', 'metric'),
             ('fp32', 'ORT fp32')] + [(g, f'INT8 {g}') for g in graphs] +
            [(f'{g}_change', f'{g} - fp32') for g in graphs])


def speed_columns(graphs):
    """The speed table's (key, title) columns of the INT8 ``graphs``."""
    return ([('config', 'config'), ('batch', 'batch'),
             ('fp32', 'ORT fp32 ms')] +
            [(g, f'INT8 {g} ms') for g in graphs] +
            [('eager', 'eager + accel ms')] +
            [(f'{g}_fp32', f'{g}: x ORT fp32') for g in graphs] +
            [(f'{g}_eager', f'{g}: x eager') for g in graphs])


def describe_cpu():
    """One line on the CPU's 8-bit integer instruction sets."""
    cpu = cpu_int8_features()
    features = ', '.join(cpu['features']) or 'unknown'
    risk = {True: '8-bit weights saturate here',
            False: 'no saturation here',
            None: 'saturation unknown'}[cpu['saturates']]
    return f'CPU: {features} ({risk})'


def main(argv=None):
    """Print the accuracy and speed tables.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.
    """
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    graphs = int8_graphs(args.full_range, args.openvino)
    accuracy_table = accuracy_columns(graphs)
    speed_table = speed_columns(graphs)
    print(describe_cpu(), flush=True)
    accuracy, speed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work_dir = args.work_dir or tmp
        for config, checkpoint in args.accuracy:
            rows = accuracy_rows(config, checkpoint, args, work_dir)
            accuracy.extend(rows)
            print(format_table(accuracy_table, rows), flush=True)
        for config in args.speed_configs:
            rows = speed_rows(config, args, work_dir)
            speed.extend(rows)
            gc.collect()  # the model, its copy and the sessions
            print(format_table(speed_table, rows), flush=True)
    if accuracy:
        print('\nAccuracy of the same test images (static mode calibrated on '
              f'{args.calibration_images} training images):\n')
        print(format_table(accuracy_table, accuracy))
    if speed:
        print(f'\n{args.threads} threads, median (fastest-slowest) of '
              f'{args.rounds} runs; speed-ups: median (lowest-highest) of '
              'the per-round ratios, above 1 = INT8 faster:\n')
        print(format_table(speed_table, speed))


if __name__ == '__main__':
    main()
