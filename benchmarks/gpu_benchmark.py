"""The GPU tables of docs/benchmarks.md: every variant against its peers in
every precision, from one command (``python -m benchmarks.gpu_benchmark``).

It builds the implementations with :mod:`benchmarks.variants` (the
same ImageNet classifier around each backbone) and times them with
:mod:`benchmarks.measure`. For each variant and precision it measures,
with the implementations taking turns in rotating order (the per-round
ratios cancel slow drifts of the machine):

- the forward pass (``model.eval()``, no gradients) at each of
  ``--forward-batches``, in images/s;
- a train step (forward, cross-entropy, backward, fused AdamW) at the
  variant's ImageNet config's per-GPU batch (``--train-batch``), in ms;
- the peak memory that train step adds (``torch.cuda.max_memory_allocated``
  on a GPU; on the CPU the resident memory's peak, with glibc's ``malloc``
  giving freed memory back at once, as ``python -m benchmarks.benchmark
  --modes memory`` does, which slows the CPU timings).

Precisions (``--precisions``):

- ``fp32``: float32 with TF32 off for products and convolutions;
- ``tf32``: float32 with TF32 on (PyTorch's ``'high'`` matmul precision and
  cuDNN's TF32 convolutions), as many training scripts set it;
- ``bf16``: bfloat16 autocast (TF32 off for what stays float32);
- ``bf16-compiled``: bfloat16 autocast on models compiled by
  ``torch.compile`` (default mode, one static graph per batch size), only
  for ``--compile-models`` and ``--compile-impls``.

The tables are printed in markdown and, with ``--out``, rewritten into a
file after every measurement, so that a run stopped by a time limit keeps
what it measured. ``--time-budget`` leaves out what would start after that
many seconds, and the table says so.

Examples::

    python -m benchmarks.gpu_benchmark --device cuda --out gpu_tables.md \\
        --time-budget 420
    python -m benchmarks.gpu_benchmark svt-s tnt-s \\
        --precisions bf16 bf16-compiled --device cuda
"""
import argparse
import contextlib
import statistics
import time
from functools import partial

import torch

from mmtnt.accel import release_freed_memory
from mmtnt.analysis import format_table, load_config
from .measure import (interleaved_rounds, new_optimizer, random_batch,
                      step_runner, train_step_memory)
from .options import (add_run_options, checked_args, checked_device,
                      device_description, rounds_note)
from .variants import (build_candidates, impl_rows, ratio_title,
                       resolve_benchmark, variants)


class Precision:
    """How a precision runs.

    Args:
        label (str): Shown above its table.
        tf32 (bool): Whether float32 products and convolutions use TF32.
        amp_dtype (torch.dtype, optional): The autocast dtype, if any.
        compiled (bool): Whether the models run through ``torch.compile``.
    """

    def __init__(self, label, tf32=False, amp_dtype=None, compiled=False):
        self.label = label
        self.tf32 = tf32
        self.amp_dtype = amp_dtype
        self.compiled = compiled

    def autocast(self, device):
        """A context factory: autocast to :attr:`amp_dtype`, or nothing."""
        if self.amp_dtype is None:
            return contextlib.nullcontext
        return partial(torch.autocast, device.type, dtype=self.amp_dtype)


PRECISIONS = {
    'fp32': Precision('float32, TF32 off'),
    'tf32': Precision('float32, TF32 on', tf32=True),
    'bf16': Precision('bfloat16 autocast', amp_dtype=torch.bfloat16),
    'bf16-compiled': Precision(
        'bfloat16 autocast, torch.compile',
        amp_dtype=torch.bfloat16,
        compiled=True),
}


def set_tf32(enabled):
    """Let float32 products and cuDNN convolutions use TF32, or not."""
    torch.set_float32_matmul_precision('high' if enabled else 'highest')
    torch.backends.cudnn.allow_tf32 = enabled


def train_batch_size(name, override=None):
    """The per-GPU batch of a variant's ImageNet config.

    Args:
        name (str): A variant (:func:`~benchmarks.variants.variants`), or a
            config file.
        override (int, optional): Returned instead, if given.

    Returns:
        int: ``train_dataloader.batch_size`` of the config.

    Examples:
        >>> train_batch_size('tnt-s')
        64
    """
    if override:
        return override
    path = name if name.endswith('.py') else variants()[name]['config']
    return load_config(path).train_dataloader.batch_size


def build_models(bench, precision, args, device):
    """The implementations of ``bench`` for ``precision`` (compiled ones
    only for ``args.compile_impls``), and those left out with why."""
    models, skipped = build_candidates(
        bench, device, compare=not args.no_peers, impls=args.impls)
    if not precision.compiled:
        return models, skipped
    compiled = {}
    for impl, model in models.items():
        if impl in args.compile_impls:
            compiled[impl] = torch.compile(
                model, dynamic=False, backend=args.compile_backend)
    return compiled, skipped


def measure(bench, precision, args, device):
    """Times and memory of every implementation of ``bench`` in
    ``precision``.

    Args:
        bench (Benchmark): What to measure.
        precision (Precision): How to run it.
        args (argparse.Namespace): From :func:`parse_args`, with
            ``train_batch_of`` (benchmark name -> train batch).
        device (torch.device): Where to run.

    Returns:
        tuple[dict, dict]: Per measurement (``'forward N'``, ``'train'``,
        ``'memory'``) and implementation the values (seconds per run, or
        bytes); the implementations left out and why.
    """
    torch.manual_seed(args.seed)
    models, skipped = build_models(bench, precision, args, device)
    autocast = precision.autocast(device)
    results = {}
    for batch in args.forward_batches:
        images, labels = random_batch(batch, bench.img_size, device)
        runners = {
            impl: step_runner('forward', model, images, labels, autocast)
            for impl, model in models.items()
        }
        results[f'forward {batch}'] = interleaved_rounds(
            runners, args.warmup, args.rounds)
    images, labels = random_batch(args.train_batch_of[bench.name],
                                  bench.img_size, device)
    optimizers = {impl: new_optimizer(m) for impl, m in models.items()}
    runners = {
        impl: step_runner('train', model, images, labels, autocast,
                          optimizers[impl])
        for impl, model in models.items()
    }
    results['train'] = interleaved_rounds(runners, args.warmup, args.rounds)
    results['memory'] = {}
    for impl, model in models.items():
        model.zero_grad(set_to_none=True)
        results['memory'][impl] = [
            train_step_memory(model.train(), optimizers[impl], images,
                              labels, autocast)
        ]
    del models, optimizers, runners
    if precision.compiled:
        # Each variant compiles afresh: dynamo's cache would otherwise fill
        # up with the graphs of the variants before it.
        torch._dynamo.reset()
    if device.type == 'cuda':
        torch.cuda.empty_cache()
    return results, skipped


def value_cells(key, values):
    """The cell of one measurement's values: images/s of a forward pass,
    ms of a train step, MiB of memory (medians)."""
    median = statistics.median(values)
    if key.startswith('forward'):
        return [f'{int(key.split()[1]) / median:.0f}']
    if key == 'train':
        return [f'{median * 1000:.1f}']
    return [f'{median / 2**20:.0f}']


def table_header(args):
    """The columns of :func:`~benchmarks.variants.impl_rows` with
    :func:`value_cells`."""
    header = ['model', 'impl']
    for batch in args.forward_batches:
        header += [f'forward b{batch} (img/s)', ratio_title('forward')]
    return header + ['train step (ms)', ratio_title('train'),
                     'train memory (MiB)', ratio_title('memory')]


class Report:
    """The markdown tables, one per precision, written as they grow.

    Args:
        header (str): The line naming the machine and the method.
        columns (list[str]): The tables' column names.
        out (str, optional): A file rewritten after every addition.

    Examples:
        >>> report = Report('A test.', ['model', 'impl'])
        >>> report.add(PRECISIONS['fp32'], [['svt-s', 'mmtnt']])
        >>> print(report.markdown())
        A test.
        <BLANKLINE>
        #### float32, TF32 off
        <BLANKLINE>
        | model | impl |
        |---|---|
        | svt-s | mmtnt |
        <BLANKLINE>
    """

    def __init__(self, header, columns, out=None):
        self.header = header
        self.columns = columns
        self.out = out
        self.sections = {}

    def add(self, precision, rows=(), notes=()):
        """Add rows and notes under ``precision``'s table; rewrite the
        file."""
        section = self.sections.setdefault(precision.label, dict(
            rows=[], notes=[]))
        section['rows'] += list(rows)
        section['notes'] += list(notes)
        self.write()

    def markdown(self):
        """The header, then per precision its table and notes."""
        parts = [self.header]
        for label, section in self.sections.items():
            parts.append(f'#### {label}')
            if section['rows']:
                parts.append(format_table(self.columns, section['rows']))
            parts += [f'- {note}' for note in section['notes']]
        return '\n\n'.join(parts) + '\n'

    def write(self):
        """Write :meth:`markdown` to ``out``, if given."""
        if self.out:
            with open(self.out, 'w') as file:
                file.write(self.markdown())


def run(args, device):
    """Measure every variant in every precision.

    Args:
        args (argparse.Namespace): From :func:`parse_args`.
        device (torch.device): Where to run.

    Returns:
        Report: The tables.
    """
    benches = [resolve_benchmark(n, args.img_size) for n in args.names]
    args.train_batch_of = {
        bench.name: train_batch_size(name, args.train_batch)
        for name, bench in zip(args.names, benches)
    }
    header = (f'{device_description(device)}; {rounds_note(args)}; train '
              'batch: ' + ', '.join(f'{k} {v}' for k, v in
                                    args.train_batch_of.items()) + '.')
    report = Report(header, table_header(args), args.out)
    start = time.perf_counter()
    for name in args.precisions:
        precision = PRECISIONS[name]
        set_tf32(precision.tf32)
        for bench in benches:
            if precision.compiled and bench.name not in args.compile_models:
                continue
            elapsed = time.perf_counter() - start
            if args.time_budget and elapsed > args.time_budget:
                report.add(precision, notes=[
                    f'{bench.name}: not measured (time budget of '
                    f'{args.time_budget:.0f} s spent)'
                ])
                continue
            try:
                results, skipped = measure(bench, precision, args, device)
            except RuntimeError as error:  # e.g. a kernel refusing a shape
                report.add(precision, notes=[
                    f'{bench.name}: failed ({str(error).splitlines()[0]})'
                ])
                torch._dynamo.reset()
                if device.type == 'cuda':
                    torch.cuda.empty_cache()
                continue
            notes = [f'{bench.name}: {impl} left out ({why})'
                     for impl, why in skipped.items()]
            report.add(precision, impl_rows(bench, results, value_cells),
                       notes)
            print(f'{precision.label}, {bench.name}: done after '
                  f'{time.perf_counter() - start:.0f} s', flush=True)
    return report


def parse_args(argv=None):
    """The options of ``python -m benchmarks.gpu_benchmark``.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Returns:
        argparse.Namespace: ``img_size`` as (H, W) or None.
    """
    parser = argparse.ArgumentParser(
        description='Time every variant against its peers in every '
        'precision and write markdown tables.')
    parser.add_argument(
        'names',
        nargs='*',
        help='variants of python -m benchmarks.benchmark --list, or config '
        'files (default: the S and B variants)')
    parser.add_argument(
        '--precisions',
        nargs='+',
        default=list(PRECISIONS),
        choices=list(PRECISIONS))
    add_run_options(parser, device='cuda', warmup=3, rounds=7)
    parser.add_argument(
        '--forward-batches', type=int, nargs='+', default=[64, 128])
    parser.add_argument(
        '--train-batch',
        type=int,
        help='train step batch (default: the config\'s per-GPU batch)')
    parser.add_argument(
        '--impls', nargs='+', help='run only these implementations')
    parser.add_argument(
        '--no-peers', action='store_true', help='time mmtnt alone')
    parser.add_argument(
        '--compile-models',
        nargs='+',
        default=['tnt-s', 'pyramidtnt-s', 'pcpvt-s', 'svt-s'],
        help='the variants timed compiled (each compile costs about a '
        'minute on a GPU)')
    parser.add_argument(
        '--compile-impls',
        nargs='+',
        default=['mmtnt', 'timm'],
        help='the implementations timed compiled')
    parser.add_argument(
        '--compile-backend',
        default='inductor',
        help='torch.compile backend (default inductor)')
    parser.add_argument(
        '--time-budget',
        type=float,
        help='seconds after which no new measurement starts')
    parser.add_argument('--out', help='also write the markdown here')
    # The warm-up runs compile the compiled models.
    args = checked_args(parser, parser.parse_args(argv))
    args.names = args.names or [
        name for name in variants() if name.endswith(('-s', '-b'))
    ]
    return args


def main(argv=None):
    """Measure and print the tables.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.
    """
    args = parse_args(argv)
    device = checked_device(args.device)
    if device.type != 'cuda' and 'tf32' in args.precisions:
        raise SystemExit('--precisions tf32 needs a CUDA device.')
    if device.type == 'cpu' and not release_freed_memory():
        print('warning: could not set the C allocator (not glibc?): the '
              'memory column counts freed but cached blocks too')
    report = run(args, device)
    print(report.markdown())


if __name__ == '__main__':
    main()
