"""Time one train step of detectors and segmentors built from their
configs, at their training sizes, measure its peak memory, and estimate
the GPU-hours of the config's schedule (``python -m
benchmarks.dense_benchmark``).

:mod:`benchmarks.dense` builds the models and their random batches
(a config of another package, named ``package::path``, runs beside mmtnt's
as a peer) and reads the schedules. The batch is the config's per-GPU
batch (``train_dataloader.batch_size``) unless ``--batch-size``.

- ``train``: ms per train step;
- ``memory``: the memory one train step adds, its peak minus what was
  allocated before it (parameters and optimizer state, created by the
  warm-up steps; no gradients). On a GPU ``torch.cuda.max_memory_allocated``;
  on the CPU the peak resident memory (``VmHWM``) with glibc's ``malloc``
  set to return every freed tensor to the system, which slows the steps
  down: time in a run of ``--modes train``.

On the CPU the models run with the CPU accelerator
(``mmtnt.accelerate_for_cpu``, as ``tools/train.py`` applies it to the
whole model), unless ``--no-cpu-accel``.

``--with-cp on`` sets ``with_cp=True`` in the backbone (its blocks are
recomputed in the backward pass); ``--with-cp both`` runs every config
with and without it. A backbone that takes no ``with_cp`` (mmseg's Twins)
runs without it, and the output says so.

After warm-up steps the configs (and with_cp variants) take turns, the
order rotating every round, so a change of machine load hits all of them
alike; the table gives the medians over the rounds, and the GPU-hours of
each config's schedule (:class:`benchmarks.dense.Schedule`).

Where mmcv has no compiled ops, mmcv's extension is the torchvision
stand-in (:mod:`benchmarks.mmcv_ops_torchvision`) in this process, and the
output says so.

Examples::

    python -m benchmarks.dense_benchmark \\
        configs/twins/mask-rcnn_twins-svt-s_fpn_1x_coco.py \\
        configs/tnt/mask-rcnn_tnt-s-p16_fpn_1x_coco.py \\
        --device cuda --with-cp both
    python -m benchmarks.dense_benchmark \\
        configs/twins/upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py \\
        mmseg::twins/twins_svt-s_uperhead_8xb2-160k_ade20k-512x512.py \\
        --device cuda --amp --out work_dirs/dense_benchmark.md
"""
import argparse
import os
import os.path as osp
import statistics
from functools import partial

import torch
from mmengine.config import DictAction
from mmengine.logging import MMLogger

from mmtnt.analysis import format_table
from mmtnt.engine import enable_amp
from . import STANDIN_OPS
from .dense import (DenseRun, Schedule, backbone_label, backbone_takes_with_cp,
                    config_label, load_dense_config, train_input_size,
                    weighs_classes)
from .measure import interleaved_rounds, peak_added_bytes, timed
from .options import (accel_note, add_cpu_options, add_run_options,
                      checked_args, checked_device, device_description,
                      malloc_note, rounds_note, set_malloc)

MODES = ('train', 'memory')


def step_measurer(run, device, memory):
    """A runner of one train step of ``run``: it returns the step's seconds
    and the bytes it added at its peak (0 unless ``memory``)."""
    step = partial(timed, run.step, device)
    if memory:
        return partial(peak_added_bytes, step, device)
    return lambda: (step(), 0)


def measure_interleaved(runs, device, warmup, rounds, memory):
    """Measure the train steps of ``runs`` in interleaved rounds
    (:func:`benchmarks.measure.interleaved_rounds`).

    Args:
        runs (list[DenseRun]): The runs.
        device (torch.device): Where they train.
        warmup (int): Unmeasured steps per run (the first creates the
            optimizer state).
        rounds (int): Measured steps per run.
        memory (bool): Measure the memory too.

    Returns:
        list[list[tuple[float, int]]]: Per run, (seconds, bytes) of every
        round.
    """
    measured = interleaved_rounds(
        {index: step_measurer(run, device, memory)
         for index, run in enumerate(runs)}, warmup, rounds)
    return [measured[index] for index in range(len(runs))]


def table_header(modes, device):
    """The columns of :func:`table_row` for ``modes``."""
    header = ['config', 'backbone', 'input', 'batch', 'with_cp']
    if 'train' in modes:
        header.append('train step')
    if 'memory' in modes:
        header.append('train memory')
    if 'train' in modes:
        hours = 'GPU-hours' if device.type == 'cuda' else 'device-hours'
        header += ['schedule', f'{hours} (lower bound)']
    return header


def table_row(run, measured, schedule, modes):
    """The cells of one run: its medians, its schedule and GPU-hours."""
    seconds = statistics.median(s for s, _ in measured)
    height, width = run.img_size
    row = [
        run.label, run.backbone, f'{height}x{width}',
        str(run.batch_size), 'on' if run.with_cp else 'off'
    ]
    if 'train' in modes:
        row.append(f'{seconds * 1000:.0f} ms')
    if 'memory' in modes:
        peak = statistics.median(b for _, b in measured)
        row.append(f'{peak / 2**20:.0f} MiB')
    if 'train' in modes:
        hours = schedule.gpu_hours(seconds, run.batch_size)
        row += [schedule.text, '-' if hours is None else f'{hours:.3g}']
    return row


def parse_args(argv=None):
    """The options of ``python -m benchmarks.dense_benchmark``.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Returns:
        argparse.Namespace: ``img_size`` as (H, W) or None; ``amp`` set
        by ``--amp-dtype`` too.
    """
    parser = argparse.ArgumentParser(
        description='Time one train step of detectors and segmentors at '
        'their training sizes, measure its memory, and estimate the '
        'GPU-hours of their schedules.')
    parser.add_argument(
        'configs', nargs='+',
        help='detector or segmentor config files, or package::path')
    parser.add_argument(
        '--modes', nargs='+', default=list(MODES), choices=MODES)
    parser.add_argument(
        '--batch-size', type=int,
        help='images per step (default: the config\'s per-GPU batch)')
    add_run_options(parser)
    add_cpu_options(parser)
    parser.add_argument(
        '--amp', action='store_true',
        help='train in mixed precision as tools/train.py --amp does '
        '(bfloat16 where the device has it)')
    parser.add_argument(
        '--amp-dtype', choices=['bfloat16', 'float16'],
        help='the autocast dtype (implies --amp; float16 on a GPU only)')
    parser.add_argument(
        '--with-cp', nargs='?', const='on', default='off',
        choices=['off', 'on', 'both'],
        help='with_cp=True in the backbone; "both" runs each config with '
        'and without it')
    parser.add_argument(
        '--train-images', type=int,
        help='training images of epoch-based configs (default: 118287 for '
        'COCO train2017)')
    parser.add_argument(
        '--cfg-options', nargs='+', action=DictAction,
        help='override settings of every config, as key=value pairs; e.g. '
        'optim_wrapper.optimizer.fused=False')
    parser.add_argument('--out', help='also write the output to this file')
    args = checked_args(
        parser, parser.parse_args(argv),
        positive=('batch_size', 'rounds', 'warmup', 'train_images'))
    args.amp = args.amp or args.amp_dtype is not None
    return args


def main(argv=None):
    """Measure every config and print the table.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.
    """
    args = parse_args(argv)
    device = checked_device(args.device)
    configs = {name: load_dense_config(name, args.cfg_options)
               for name in args.configs}
    # Quiet: mmengine logs every parameter's optimizer settings.
    MMLogger.get_instance('dense_benchmark', log_level='WARNING')
    if args.threads:
        torch.set_num_threads(args.threads)
    set_malloc(args, device)
    load = os.getloadavg()[0]
    variants = dict(off=[False], on=[True], both=[False, True])[args.with_cp]
    runs, schedules, notes = [], [], []
    for name, cfg in configs.items():
        if args.amp:
            try:
                enable_amp(cfg, args.amp_dtype, device.type)
            except ValueError as error:
                raise SystemExit(str(error))
        schedule = Schedule(cfg, name, args.train_images)
        img_size = args.img_size or train_input_size(cfg)
        batch_size = args.batch_size or schedule.per_gpu_batch
        if cfg.default_scope == 'mmseg' and weighs_classes(cfg.model):
            notes.append(f'{config_label(name)}: its losses weigh the classes'
                         ', which mmseg cannot do with ignored pixels: none '
                         'are ignored.')
        with_cp = variants
        if True in variants and not backbone_takes_with_cp(cfg):
            notes.append(f'{config_label(name)}: {backbone_label(cfg)} takes '
                         'no with_cp: it runs without.')
            with_cp = [False]
        for flag in with_cp:
            runs.append(
                DenseRun(name, cfg, img_size, batch_size, device, flag,
                         args.cpu_accel, args.seed))
            schedules.append(schedule)
    measured = measure_interleaved(runs, device, args.warmup, args.rounds,
                                   'memory' in args.modes)
    rows = [
        table_row(run, values, schedule, args.modes)
        for run, values, schedule in zip(runs, measured, schedules)
    ]
    precision = 'float32'
    if args.amp:
        dtypes = sorted({c.optim_wrapper.dtype for c in configs.values()})
        precision = 'autocast ' + '/'.join(dtypes)

    lines = [
        f'{device_description(device)}; {precision}, '
        f'{torch.get_num_threads()} threads, {rounds_note(args)}; '
        f'{accel_note(args, device)}; {malloc_note(args)}; load average '
        f'{load:.1f} -> {os.getloadavg()[0]:.1f}', '',
        format_table(table_header(args.modes, device), rows), ''
    ]
    if 'train' in args.modes:
        lines.append(
            'Hours: the schedule\'s iterations x the train step (scaled to '
            'the per-GPU batch) x the GPUs / 3600, a lower bound: data '
            'loading, communication, validation and checkpoints are not '
            'counted.')
    if STANDIN_OPS:
        notes.append('NMS and RoIAlign: torchvision\'s, through '
                     'benchmarks.mmcv_ops_torchvision (no compiled mmcv ops).')
    text = '\n'.join(lines + notes)
    print(f'\n{text}')
    if args.out:
        os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
        with open(args.out, 'w') as out:
            out.write(text + '\n')


if __name__ == '__main__':
    main()
