"""Time mmtnt's backbones, measure their training memory, and compare them
with other implementations of the same architecture in one process
(``python -m benchmarks.benchmark``).

A benchmark is a variant name (``--list`` shows them) or a config file,
whose ``model.backbone`` is measured. Every backbone is wrapped into an
ImageNet classifier (:mod:`benchmarks.variants`) and run on one random
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
in afresh, for every implementation alike. ``--default-malloc`` measures
without it. A run that measures memory gives freed memory back throughout, its
timings included: time in a separate run.

With ``--compare``, the timm, mmpretrain and mmseg implementations of the
variant run too (those installed). After warm-up runs the implementations
take turns, the order rotating every round, so a change of machine load
hits all of them alike. The tables give medians over the rounds and, per
peer, the median of the per-round ratios, so slow drifts of the load
cancel: ``time peer/mmtnt`` above 1 means mmtnt is faster, ``memory
mmtnt/peer`` below 1 that it needs less.

With ``--amp-speedup`` each implementation runs with and without autocast
in turns, and the table gives both times and the median per-round speedup;
``--compile-speedup`` does the same eager and compiled by ``torch.compile``
(inductor; the batch's height and width dynamic, as training at varied
sizes compiles them; the first warm-up runs compile).

Each time is also given as achieved GFLOP/s (2 FLOPs per multiply-add, the
forward's multiply-adds as counted by :mod:`mmtnt.analysis.flops`, attention
products included; a train step counts three forwards' worth) and as a
fraction of the machine's measured matrix-product peak for the dtype used
(the best of repeated large products with the same threads, by the BLAS or
oneDNN).

Examples::

    python -m benchmarks.benchmark pcpvt-s svt-s --compare
    python -m benchmarks.benchmark tnt-s --modes memory --img-size 512 \\
        --batch-size 2 --compare [--with-cp]
    python -m benchmarks.benchmark \\
        configs/twins/twins-svt-small_8xb128_in1k.py --amp
    python -m benchmarks.benchmark tnt-s svt-s --amp-speedup
    python -m benchmarks.benchmark svt-s --compile-speedup --modes train \\
        --img-size 512 672 --batch-size 2
    python -m benchmarks.benchmark svt-s --profile mmtnt
    python -m benchmarks.benchmark --list
"""
import argparse
import contextlib
import os
import statistics
from functools import partial

import torch

from mmtnt.accel import accelerate_for_cpu
from mmtnt.analysis import format_table, forward_macs
from mmtnt.engine import default_amp_dtype
from .measure import (interleaved_rounds, matmul_peak, new_optimizer,
                      random_batch, ratio_cell, step_runner, train_step_memory)
from .options import (accel_note, add_cpu_options, add_run_options,
                      checked_args, checked_device, malloc_note, rounds_note,
                      set_malloc)
from .variants import (build_candidates, impl_rows, ratio_title,
                       resolve_benchmark, variants)

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


def unchanged(model):
    """The model itself (the reference way of :func:`speedup_ways`)."""
    return model


def speedup_ways(args, device):
    """The two ways every implementation runs in turns with
    ``--amp-speedup`` or ``--compile-speedup``.

    Args:
        args (argparse.Namespace): From :func:`parse_args`.
        device (torch.device): Where the models run.

    Returns:
        dict: Way name -> (a function of the model giving what runs, the
        precision context factory), the reference way first.
    """
    if args.amp_speedup:
        autocast = partial(torch.autocast, device.type,
                           dtype=amp_dtype(args, device, force=True))
        return dict(fp32=(unchanged, contextlib.nullcontext),
                    autocast=(unchanged, autocast))
    autocast = make_autocast(args, device)
    return dict(eager=(unchanged, autocast),
                compiled=(torch.compile, autocast))


def run_speedup(bench, args, device):
    """Time each implementation in the two :func:`speedup_ways`, in turns.

    With ``--compile-speedup`` the batch's height and width are marked
    dynamic, so that the compiled model runs the graph that training at
    varied input sizes (detection, segmentation) runs.

    Args:
        bench (Benchmark): What to measure.
        args (argparse.Namespace): From :func:`parse_args`.
        device (torch.device): Where to run.

    Returns:
        tuple[list[list[str]], dict]: Table rows (per mode the median of
        each way and the median per-round speedup of the second); the
        implementations left out and why.
    """
    torch.manual_seed(args.seed)
    models, skipped = _candidates(bench, args, device)
    images, labels = random_batch(args.batch_size, bench.img_size, device)
    if args.compile_speedup:
        torch._dynamo.mark_dynamic(images, (2, 3))
    ways = speedup_ways(args, device)
    reference, other = ways
    rows = []
    for impl, model in models.items():
        row = [bench.label, impl]
        for mode in ('forward', 'train'):
            if mode not in args.modes:
                continue
            optimizer = new_optimizer(model) if mode == 'train' else None
            runners = {
                way: step_runner(mode, wrap(model), images, labels, context,
                                 optimizer)
                for way, (wrap, context) in ways.items()
            }
            times = interleaved_rounds(runners, args.warmup, args.rounds)
            model.zero_grad(set_to_none=True)
            row += [
                f'{statistics.median(times[reference]) * 1000:.0f} ms',
                f'{statistics.median(times[other]) * 1000:.0f} ms',
                ratio_cell(times[reference], times[other], True)
            ]
        rows.append(row)
    torch._dynamo.reset()
    return rows, skipped


def summarize(bench, results, macs, skipped, args, peak):
    """Table rows of :func:`run_benchmark`'s results, one per
    implementation (:func:`~benchmarks.variants.impl_rows`); the
    implementations left out are printed.

    Args:
        bench (Benchmark): What was measured.
        results (dict): Per mode and implementation the values.
        macs (int, optional): The forward MACs per image.
        skipped (dict): Implementations left out -> why.
        args (argparse.Namespace): From :func:`parse_args`.
        peak (float, optional): The matmul peak in GFLOP/s (with
            ``macs``).

    Returns:
        list[list[str]]: The rows.
    """

    def value_cells(mode, values):
        median = statistics.median(values)
        if mode == 'memory':
            return [f'{median / 2**20:.0f} MiB']
        if mode == 'forward':
            cells = [f'{args.batch_size / median:.1f} img/s']
        else:
            cells = [f'{median * 1000:.0f} ms']
        if macs is None:
            return cells + ['-']
        flops = 2 * macs * args.batch_size * (3 if mode == 'train' else 1)
        gflops = flops / median / 1e9
        return cells + [f'{gflops:.0f} ({gflops / peak:.0%})']

    for impl, reason in skipped.items():
        print(f'{bench.name}: {impl} skipped ({reason})')
    return impl_rows(bench, results, value_cells)


def table_header(modes):
    """The columns of :func:`summarize`'s rows for ``modes``."""
    titles = dict(
        forward=['forward', 'GFLOP/s (of peak)'],
        train=['train step', 'GFLOP/s (of peak)'],
        memory=['train memory'])
    header = ['model', 'impl']
    for mode in modes:
        header += titles[mode] + [ratio_title(mode)]
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


def print_speedup(benches, args, device, load):
    """Run :func:`run_speedup` on every benchmark and print the table.

    Args:
        benches (list[Benchmark]): What to measure.
        args (argparse.Namespace): From :func:`parse_args`.
        device (torch.device): Where to run.
        load (float): The load average before the run.
    """
    rows = []
    for bench in benches:
        bench_rows, skipped = run_speedup(bench, args, device)
        rows += bench_rows
        for impl, reason in skipped.items():
            print(f'{bench.name}: {impl} skipped ({reason})')
    reference, other = speedup_ways(args, device)
    header = ['model', 'impl']
    for mode in ('forward', 'train'):
        if mode in args.modes:
            name = 'forward' if mode == 'forward' else 'train step'
            header += [f'{name} {reference}', f'{name} {other}', 'speedup']
    if args.amp_speedup:
        what = (f'autocast {amp_dtype(args, device, force=True)} against '
                'float32')
    else:
        what = ('torch.compile (inductor, dynamic height and width) '
                f'against eager, {amp_dtype(args, device)}')
    print(f'\n{device.type}, {what}, batch {args.batch_size}, '
          f'{args.threads} threads, {rounds_note(args)}; '
          f'{accel_note(args, device)}; {malloc_note(args)}; load average '
          f'{load:.1f} -> {os.getloadavg()[0]:.1f}')
    print(format_table(header, rows))


def parse_args(argv=None):
    """The options of ``python -m benchmarks.benchmark``.

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
    add_run_options(parser)
    add_cpu_options(parser)
    parser.set_defaults(threads=2)
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
        '--compile-speedup',
        action='store_true',
        help='time every implementation eager and compiled by '
        'torch.compile (inductor, the input\'s height and width dynamic), '
        'in turns, and print the speedup compiling gives')
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
        '--profile',
        metavar='IMPL',
        help='profile one implementation with torch.profiler instead of '
        'timing')
    parser.add_argument('--profile-rows', type=int, default=25)
    args = checked_args(parser, parser.parse_args(argv),
                        positive=('batch_size', 'rounds', 'threads'))
    if args.amp_dtype and not (args.amp or args.amp_speedup):
        parser.error('--amp-dtype needs --amp or --amp-speedup.')
    if args.amp_speedup and (args.amp or 'memory' in args.modes):
        parser.error('--amp-speedup times forward and train steps with and '
                     'without autocast: leave out --amp and the memory mode.')
    if args.compile_speedup and (args.amp_speedup or 'memory' in args.modes):
        parser.error('--compile-speedup times forward and train steps eager '
                     'and compiled: leave out --amp-speedup and the memory '
                     'mode.')
    return args


def main(argv=None):
    """List the variants, profile, or print the tables.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.
    """
    args = parse_args(argv)
    if args.list or not args.names:
        for name, variant in variants().items():
            peers = ', '.join(resolve_benchmark(name).peers) or 'no peers'
            print(f'{name}: {variant["side"]}px, {peers}')
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
    if args.amp_speedup or args.compile_speedup:
        print_speedup(benches, args, device, load)
        return
    dtype = amp_dtype(args, device)
    peak = matmul_peak(dtype, device) if args.flops else None
    modes = [m for m in MODES if m in args.modes]
    rows = []
    for bench in benches:
        results, macs, skipped = run_benchmark(bench, args, device)
        rows += summarize(bench, results, macs, skipped, args, peak)
    print(f'\n{device.type}, {dtype} '
          f'{"autocast" if args.amp else "(no autocast)"}, batch '
          f'{args.batch_size}, {args.threads} threads, {rounds_note(args)}; '
          f'{accel_note(args, device)}; {malloc_note(args)}; ' +
          (f'matmul peak {peak:.0f} GFLOP/s; ' if peak else '') +
          f'load average {load:.1f} -> {os.getloadavg()[0]:.1f}')
    print(format_table(table_header(modes), rows))


if __name__ == '__main__':
    main()
