"""Time mmtnt's backbones, measure their training memory, and compare them
with other implementations of the same architecture in one process: the
library behind ``tools/analysis_tools/benchmark.py``.

A benchmark is a variant name (``--list`` shows them) or a config file,
whose ``model.backbone`` is measured. Every backbone is wrapped into an
ImageNet classifier (:mod:`mmtnt.analysis.variants`) and run on one random
batch:

- ``forward``: ``model.eval()`` under ``torch.no_grad()``, in images/s;
- ``train``: ``model.train()``, forward, cross-entropy, backward and one
  AdamW step (``fused=True``, as in the configs), in ms per step;
- ``memory``: the memory one train step adds, its peak minus what was
  allocated before it (parameters and optimizer state, no gradients). On
  the CPU this is the peak resident memory with glibc's ``malloc`` set to
  return every freed tensor to the system (``release_freed_memory``),
  measured after all timings; on a GPU, ``torch.cuda.max_memory_allocated``.

On the CPU mmtnt's backbone runs with the CPU accelerator
(``mmtnt.accelerate_for_cpu``, as ``tools/train.py`` applies it), unless
``--no-cpu-accel``; with ``--compare`` the plain backbone runs too, as
``mmtnt-plain``. Timings on the CPU run with ``malloc`` keeping freed
memory for reuse (``mmtnt.accel.keep_freed_memory``, as ``tools/train.py``
does): with glibc's default every train step page-faults its activations
in afresh, for every implementation alike (docs/benchmarks.md gives what
that cost on the project's machine). ``--default-malloc`` measures without
it. A run that measures memory gives freed memory back throughout, its
timings included: time in a separate run.

With ``--compare``, the timm, mmpretrain and mmseg implementations of the
variant run too (those installed). After warm-up runs the implementations
take turns, the order rotating every round, so a change of machine load
hits all of them alike. The tables give medians over the rounds and, per
peer, the median of the per-round ratios, so slow drifts of the load
cancel: ``time peer/mmtnt`` above 1 means mmtnt is faster, ``memory
mmtnt/peer`` below 1 that it needs less.

With ``--amp-speedup`` each implementation runs with and without autocast
in turns, and the table gives both times and the median per-round speedup.

Each time is also given as achieved GFLOP/s (2 FLOPs per multiply-add, the
forward's multiply-adds as counted by :mod:`mmtnt.analysis.flops`, attention
products included; a train step counts three forwards' worth) and as a
fraction of the machine's measured matrix-product peak for the dtype used
(the best of repeated large products with the same threads, by the BLAS or
oneDNN).

Examples:
    >>> from mmtnt.analysis.benchmark import main
    >>> main(['svt-s', '--modes', 'forward', '--img-size', '64',
    ...       '--batch-size', '1', '--rounds', '2'])  # doctest: +SKIP
"""
import argparse
import contextlib
import os
import statistics
from functools import partial

import torch

from mmtnt.accel import accelerate_for_cpu
from mmtnt.engine import default_amp_dtype
from .flops import forward_macs
from .options import (accel_note, checked_device, checked_img_size,
                      malloc_note, set_malloc)
from .tables import format_table, ratio_cell
from .timing import (interleaved_rounds, matmul_peak, new_optimizer,
                     random_batch, step_runner, train_step_memory)
from .variants import VARIANTS, build_candidates, resolve_benchmark

MODES = ('forward', 'train', 'memory')


def amp_dtype(args, device, force=False):
    """The autocast dtype of a run.

    Args:
        args (argparse.Namespace): With ``amp`` and ``amp_dtype``.
        device (torch.device): Its default dtype is taken when
            ``args.amp_dtype`` is None (``default_amp_dtype``).
        force (bool): Give the autocast dtype even without ``args.amp``.

    Returns:
        torch.dtype: float32 without ``--amp`` (unless ``force``).

    Examples:
        >>> amp_dtype(argparse.Namespace(amp=True, amp_dtype=None),
        ...           torch.device('cpu'))
        torch.bfloat16
    """
    if not (args.amp or force):
        return torch.float32
    return getattr(torch, args.amp_dtype or default_amp_dtype(device.type))


def make_autocast(args, device):
    """A context factory: autocast with :func:`amp_dtype`, or nothing
    without ``args.amp``."""
    if not args.amp:
        return contextlib.nullcontext
    return partial(torch.autocast, device.type, dtype=amp_dtype(args, device))


def _candidates(bench, args, device):
    """:func:`build_candidates` with the run's options."""
    return build_candidates(
        bench,
        device,
        compare=args.compare,
        impls=args.impls,
        cpu_accel=args.cpu_accel)


def run_benchmark(bench, args, device):
    """Measure every implementation of ``bench`` in the chosen modes.

    Args:
        bench (Benchmark): What to measure.
        args (argparse.Namespace): From :func:`parse_args`.
        device (torch.device): Where to run.

    Returns:
        tuple[dict, dict, dict]: Per mode and implementation the values
        (seconds per run, or bytes for ``memory``); the forward MACs per
        image of the mmtnt model; the implementations left out and why.
    """
    torch.manual_seed(args.seed)
    models, skipped = _candidates(bench, args, device)
    images, labels = random_batch(args.batch_size, bench.img_size, device)
    autocast = make_autocast(args, device)
    macs = None
    if 'mmtnt' in models and args.flops:
        macs = forward_macs(models['mmtnt'], images[:1])
    results = {}
    for mode in ('forward', 'train'):
        if mode not in args.modes:
            continue
        runners = {
            impl: step_runner(mode, model, images, labels, autocast,
                              new_optimizer(model) if mode == 'train' else
                              None)
            for impl, model in models.items()
        }
        results[mode] = interleaved_rounds(runners, args.warmup, args.rounds)
        for model in models.values():
            # Free gradients before the next mode or benchmark.
            model.zero_grad(set_to_none=True)
    if 'memory' in args.modes:
        results['memory'] = {}
        for impl, model in models.items():
            optimizer = new_optimizer(model)
            results['memory'][impl] = [
                train_step_memory(model.train(), optimizer, images, labels,
                                  autocast)
            ]
            model.zero_grad(set_to_none=True)
            del optimizer
    return results, macs, skipped


def run_amp_speedup(bench, args, device):
    """Time each implementation with and without autocast, in turns.

    Args:
        bench (Benchmark): What to measure.
        args (argparse.Namespace): From :func:`parse_args`.
        device (torch.device): Where to run.

    Returns:
        tuple[list[list[str]], dict]: Table rows (per mode the float32 and
        autocast medians and the median per-round speedup); the
        implementations left out and why.
    """
    torch.manual_seed(args.seed)
    models, skipped = _candidates(bench, args, device)
    images, labels = random_batch(args.batch_size, bench.img_size, device)
    contexts = dict(
        fp32=contextlib.nullcontext,
        amp=partial(
            torch.autocast,
            device.type,
            dtype=amp_dtype(args, device, force=True)))
    label = f'{bench.name} ({bench.img_size[0]}x{bench.img_size[1]})'
    rows = []
    for impl, model in models.items():
        row = [label, impl]
        for mode in ('forward', 'train'):
            if mode not in args.modes:
                continue
            optimizer = new_optimizer(model) if mode == 'train' else None
            runners = {
                k: step_runner(mode, model, images, labels, c, optimizer)
                for k, c in contexts.items()
            }
            times = interleaved_rounds(runners, args.warmup, args.rounds)
            model.zero_grad(set_to_none=True)
            row += [
                f'{statistics.median(times["fp32"]) * 1000:.0f} ms',
                f'{statistics.median(times["amp"]) * 1000:.0f} ms',
                ratio_cell(times['fp32'], times['amp'], True)
            ]
        rows.append(row)
    return rows, skipped


def summarize(bench, results, macs, skipped, args, peak):
    """Table rows of :func:`run_benchmark`'s results, one per
    implementation; the implementations left out are printed.

    Args:
        bench (Benchmark): What was measured.
        results (dict): Per mode and implementation the values.
        macs (int, optional): The forward MACs per image.
        skipped (dict): Implementations left out -> why.
        args (argparse.Namespace): From :func:`parse_args`.
        peak (float): The matmul peak in GFLOP/s.

    Returns:
        list[list[str]]: The rows.
    """
    rows = []
    label = f'{bench.name} ({bench.img_size[0]}x{bench.img_size[1]})'
    impls = list(next(iter(results.values()))) if results else []
    reference = {mode: values.get('mmtnt') for mode, values in
                 results.items()}
    for impl in impls:
        row = [label, impl]
        for mode, values in results.items():
            median = statistics.median(values[impl])
            if mode == 'forward':
                row.append(f'{args.batch_size / median:.1f} img/s')
            elif mode == 'train':
                row.append(f'{median * 1000:.0f} ms')
            else:
                row.append(f'{median / 2**20:.0f} MiB')
            if mode != 'memory' and macs is not None:
                flops = 2 * macs * args.batch_size * (3 if mode == 'train'
                                                      else 1)
                row.append(f'{flops / median / 1e9:.0f} '
                           f'({flops / median / 1e9 / peak:.0%})')
            elif mode != 'memory':
                row.append('-')
            if impl == 'mmtnt' or reference[mode] is None:
                row.append('-')
            else:
                row.append(
                    ratio_cell(values[impl], reference[mode],
                               peer_over_own=mode != 'memory'))
        rows.append(row)
    for impl, reason in skipped.items():
        print(f'{bench.name}: {impl} skipped ({reason})')
    return rows


def table_header(modes):
    """The columns of :func:`summarize`'s rows for ``modes``."""
    header = ['model', 'impl']
    for mode in modes:
        if mode == 'forward':
            header += ['forward', 'GFLOP/s (of peak)', 'time peer/mmtnt']
        elif mode == 'train':
            header += ['train step', 'GFLOP/s (of peak)', 'time peer/mmtnt']
        else:
            header += ['train memory', 'memory mmtnt/peer']
    return header


def profile(bench, args, device):
    """Print torch.profiler's table of one forward / train step of the
    implementation ``args.profile``.

    Args:
        bench (Benchmark): What to profile.
        args (argparse.Namespace): From :func:`parse_args`.
        device (torch.device): Where to run.
    """
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    builders = bench.builders(compare=True, with_plain=True)
    if args.profile not in builders:
        raise SystemExit(f'{bench.name} has no implementation '
                         f'{args.profile!r}: choose from {list(builders)}.')
    model = builders[args.profile](img_size=bench.img_size).to(device)
    if args.profile == 'mmtnt' and args.cpu_accel and device.type == 'cpu':
        accelerate_for_cpu(model.backbone)
    images, labels = random_batch(args.batch_size, bench.img_size, device)
    optimizer = new_optimizer(model)
    autocast = make_autocast(args, device)
    activities = [ProfilerActivity.CPU]
    if device.type == 'cuda':
        activities.append(ProfilerActivity.CUDA)
    for mode in args.modes:
        if mode == 'memory':
            continue
        step = step_runner(mode, model, images, labels, autocast, optimizer)
        for _ in range(max(1, args.warmup)):
            step()
        with torch_profile(activities=activities) as prof:
            step()
        print(f'\n{bench.name} {args.profile} {mode} (batch '
              f'{args.batch_size}):')
        print(prof.key_averages().table(
            sort_by='self_cpu_time_total', row_limit=args.profile_rows))


def print_amp_speedup(benches, args, device, load):
    """Run :func:`run_amp_speedup` on every benchmark and print the table.

    Args:
        benches (list[Benchmark]): What to measure.
        args (argparse.Namespace): From :func:`parse_args`.
        device (torch.device): Where to run.
        load (float): The load average before the run.
    """
    rows = []
    for bench in benches:
        bench_rows, skipped = run_amp_speedup(bench, args, device)
        rows += bench_rows
        for impl, reason in skipped.items():
            print(f'{bench.name}: {impl} skipped ({reason})')
    header = ['model', 'impl']
    for mode in ('forward', 'train'):
        if mode in args.modes:
            name = 'forward' if mode == 'forward' else 'train step'
            header += [f'{name} fp32', f'{name} autocast', 'speedup']
    print(f'\n{device.type}, autocast '
          f'{amp_dtype(args, device, force=True)} against float32, batch '
          f'{args.batch_size}, {args.threads} threads, median of '
          f'{args.rounds} interleaved rounds after {args.warmup} warm-up '
          f'runs; {accel_note(args, device)}; {malloc_note(args)}; load '
          f'average {load:.1f} -> '
          f'{os.getloadavg()[0]:.1f}')
    print(format_table(header, rows))


def parse_args(argv=None):
    """The options of ``benchmark.py``.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Returns:
        argparse.Namespace: ``img_size`` as (H, W) or None.
    """
    parser = argparse.ArgumentParser(
        description='Time mmtnt backbones, measure their training memory, '
        'and compare them with timm, mmpretrain and mmseg.')
    parser.add_argument(
        'names', nargs='*', help='variants (see --list) or config files')
    parser.add_argument(
        '--list', action='store_true', help='list the variants and exit')
    parser.add_argument(
        '--compare',
        action='store_true',
        help='also run the timm/mmpretrain/mmseg implementations')
    parser.add_argument(
        '--impls', nargs='+', help='run only these implementations')
    parser.add_argument(
        '--modes', nargs='+', default=['forward', 'train'], choices=MODES)
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument(
        '--img-size',
        type=int,
        nargs='+',
        help='input side, or H W (default: the published size, or the '
        'config\'s test size)')
    parser.add_argument(
        '--device', default='cpu', help='cpu, cuda or cuda:N')
    parser.add_argument(
        '--amp',
        action='store_true',
        help='autocast: bfloat16 on the CPU and on GPUs that have it, as '
        'tools/train.py --amp; float16 on older GPUs')
    parser.add_argument(
        '--amp-dtype',
        choices=['float16', 'bfloat16'],
        help='the autocast dtype (with --amp or --amp-speedup)')
    parser.add_argument(
        '--amp-speedup',
        action='store_true',
        help='time every implementation with and without autocast, in '
        'turns, and print the speedup autocast gives')
    parser.add_argument(
        '--threads',
        type=int,
        default=2,
        help='torch.set_num_threads (default 2)')
    parser.add_argument(
        '--warmup',
        type=int,
        default=2,
        help='untimed runs per implementation and mode')
    parser.add_argument(
        '--rounds',
        type=int,
        default=5,
        help='timed runs per implementation and mode')
    parser.add_argument(
        '--with-cp',
        action='store_true',
        help='mmtnt\'s backbone recomputes its blocks in the backward pass '
        '(with_cp=True); the peers do not')
    parser.add_argument(
        '--no-flops',
        dest='flops',
        action='store_false',
        help='skip counting FLOPs (no GFLOP/s columns)')
    parser.add_argument(
        '--default-malloc',
        dest='keep_freed_memory',
        action='store_false',
        help='leave glibc\'s malloc giving freed memory back to the kernel '
        '(its default) instead of keeping it for reuse, as tools/train.py '
        'does')
    parser.add_argument(
        '--no-cpu-accel',
        dest='cpu_accel',
        action='store_false',
        help='run mmtnt\'s plain backbone on the CPU too, without '
        'mmtnt.accelerate_for_cpu')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument(
        '--profile',
        metavar='IMPL',
        help='profile one implementation with torch.profiler instead of '
        'timing')
    parser.add_argument('--profile-rows', type=int, default=25)
    args = parser.parse_args(argv)
    args.img_size = checked_img_size(parser, args.img_size)
    for bad in ('batch_size', 'rounds', 'threads'):
        if getattr(args, bad) < 1:
            parser.error(f'--{bad.replace("_", "-")} must be positive.')
    if args.amp_dtype and not (args.amp or args.amp_speedup):
        parser.error('--amp-dtype needs --amp or --amp-speedup.')
    if args.amp_speedup and (args.amp or 'memory' in args.modes):
        parser.error('--amp-speedup times forward and train steps with and '
                     'without autocast: leave out --amp and the memory mode.')
    return args


def main(argv=None):
    """``benchmark.py``: list the variants, profile, or print the tables.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.
    """
    args = parse_args(argv)
    if args.list or not args.names:
        for name, variant in VARIANTS.items():
            peers = ', '.join(variant['peers']) or 'no peers'
            print(f'{name}: {variant["img_size"]}px, {peers}')
        return
    device = checked_device(args.device)
    benches = [
        resolve_benchmark(n, args.img_size, args.with_cp) for n in args.names
    ]
    torch.set_num_threads(args.threads)
    set_malloc(args, device)
    if args.profile:
        for bench in benches:
            profile(bench, args, device)
        return
    load = os.getloadavg()[0]
    if args.amp_speedup:
        print_amp_speedup(benches, args, device, load)
        return
    dtype = amp_dtype(args, device)
    peak = matmul_peak(dtype, device)
    modes = [m for m in MODES if m in args.modes]
    rows = []
    for bench in benches:
        results, macs, skipped = run_benchmark(bench, args, device)
        rows += summarize(bench, results, macs, skipped, args, peak)
    print(f'\n{device.type}, {dtype} '
          f'{"autocast" if args.amp else "(no autocast)"}, batch '
          f'{args.batch_size}, {args.threads} threads, median of '
          f'{args.rounds} interleaved rounds after {args.warmup} warm-up '
          f'runs; {accel_note(args, device)}; {malloc_note(args)}; matmul '
          f'peak {peak:.0f} GFLOP/s; '
          f'load average {load:.1f} '
          f'-> {os.getloadavg()[0]:.1f}')
    print(format_table(table_header(modes), rows))
