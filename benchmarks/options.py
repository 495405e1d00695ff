"""What the benchmarks' command lines share: their common options, the
device, the input size, the C allocator's setting, and the words that
describe a run."""
import os

import torch

from mmtnt.accel import keep_freed_memory, release_freed_memory
from mmtnt.analysis.cli import parse_shape


def add_run_options(parser, device='cpu', warmup=2, rounds=5):
    """Add the options of every measuring command line: ``--device``,
    ``--img-size``, ``--warmup``, ``--rounds`` and ``--seed``.

    Args:
        parser (argparse.ArgumentParser): Gets the options.
        device (str): The default device.
        warmup (int): The default warm-up runs.
        rounds (int): The default measured rounds.

    Examples:
        >>> import argparse
        >>> parser = argparse.ArgumentParser()
        >>> add_run_options(parser)
        >>> parser.parse_args(['--rounds', '3']).rounds
        3
    """
    parser.add_argument(
        '--device', default=device, help='cpu, cuda or cuda:N')
    parser.add_argument(
        '--img-size', type=int, nargs='+',
        help='input side, or H W (default: the published size, or the '
        'config\'s)')
    add_timing_options(parser, warmup, rounds)
    parser.add_argument('--seed', type=int, default=0)


def add_timing_options(parser, warmup, rounds):
    """Add ``--warmup`` and ``--rounds``, which every benchmark's timing
    loop (:func:`benchmarks.measure.interleaved_rounds`) takes.

    Args:
        parser (argparse.ArgumentParser): Gets the options.
        warmup (int): The default warm-up runs.
        rounds (int): The default measured rounds.

    Examples:
        >>> import argparse
        >>> parser = argparse.ArgumentParser()
        >>> add_timing_options(parser, warmup=1, rounds=5)
        >>> parser.parse_args([]).rounds
        5
    """
    parser.add_argument(
        '--warmup', type=int, default=warmup,
        help='unmeasured runs of each first')
    parser.add_argument(
        '--rounds', type=int, default=rounds,
        help='measured rounds; each runs everything once, the order '
        'rotating')


def add_cpu_options(parser):
    """Add ``--threads``, ``--default-malloc`` and ``--no-cpu-accel``, the
    options of the benchmarks that time on the CPU too.

    Args:
        parser (argparse.ArgumentParser): Gets the options.
    """
    parser.add_argument(
        '--threads', type=int, help='torch.set_num_threads (default: '
        'torch\'s)')
    parser.add_argument(
        '--default-malloc', dest='keep_freed_memory', action='store_false',
        help='leave glibc\'s malloc giving freed memory back to the kernel '
        '(its default) instead of keeping it for reuse, as tools/train.py '
        'does')
    parser.add_argument(
        '--no-cpu-accel', dest='cpu_accel', action='store_false',
        help='run mmtnt\'s plain models on the CPU too, without '
        'mmtnt.accelerate_for_cpu')


def checked_args(parser, args, positive=('rounds', 'warmup')):
    """Check the parsed options of :func:`add_run_options`: ``img_size``
    becomes (H, W) or None, and the options named in ``positive`` must be
    at least 1 where given.

    Args:
        parser (argparse.ArgumentParser): Reports a bad value.
        args (argparse.Namespace): The parsed options; changed in place.
        positive (Sequence[str]): Options (their ``dest``) that must be
            positive.

    Returns:
        argparse.Namespace: ``args``.

    Examples:
        >>> import argparse
        >>> args = checked_args(argparse.ArgumentParser(),
        ...                     argparse.Namespace(img_size=[64], rounds=2))
        >>> args.img_size
        (64, 64)
    """
    args.img_size = parse_shape(parser, args.img_size, '--img-size')
    for name in positive:
        value = getattr(args, name, None)
        if value is not None and value < 1:
            parser.error(f'--{name.replace("_", "-")} must be positive.')
    return args


def rounds_note(args):
    """How the measurements were taken, in words.

    Examples:
        >>> import argparse
        >>> rounds_note(argparse.Namespace(rounds=5, warmup=2))
        'median of 5 interleaved rounds after 2 warm-up runs'
    """
    return (f'median of {args.rounds} interleaved rounds after '
            f'{args.warmup} warm-up runs')


def checked_device(name):
    """``torch.device(name)``; exits with one line if it names CUDA on a
    machine without a GPU.

    Args:
        name (str): ``'cpu'``, ``'cuda'`` or ``'cuda:N'``.

    Returns:
        torch.device: The device.

    Raises:
        SystemExit: For CUDA without a GPU.

    Examples:
        >>> checked_device('cpu')
        device(type='cpu')
    """
    device = torch.device(name)
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise SystemExit(f'--device {name}: no GPU is available.')
    return device


def set_malloc(args, device):
    """Set how glibc's ``malloc`` handles freed memory for the whole run.

    On the CPU freed memory is given back at once when ``args.modes`` has
    ``'memory'`` (so that the resident memory follows the live tensors),
    otherwise kept for reuse unless ``args.keep_freed_memory`` is False
    (``--default-malloc``). The outcome is recorded in ``args.malloc``
    (``'release'``, ``'keep'`` or ``'default'``, see :func:`malloc_note`).

    Args:
        args (argparse.Namespace): With ``modes`` and
            ``keep_freed_memory``; ``malloc`` is set.
        device (torch.device): Nothing is set off the CPU.

    Examples:
        >>> import argparse
        >>> args = argparse.Namespace(modes=['train'],
        ...                           keep_freed_memory=False)
        >>> set_malloc(args, torch.device('cpu'))
        >>> args.malloc
        'default'
    """
    args.malloc = 'default'
    if device.type != 'cpu':
        return
    if 'memory' in args.modes:
        if release_freed_memory():
            args.malloc = 'release'
        else:
            print('warning: could not set the C allocator (not glibc?): the '
                  'memory column counts freed but cached blocks too')
    elif args.keep_freed_memory and keep_freed_memory():
        args.malloc = 'keep'


def accel_note(args, device):
    """Whether mmtnt's models run with the CPU accelerator, in words.

    Args:
        args (argparse.Namespace): With ``cpu_accel``.
        device (torch.device): The accelerator runs on the CPU only.

    Returns:
        str: The note.

    Examples:
        >>> import argparse
        >>> accel_note(argparse.Namespace(cpu_accel=True),
        ...            torch.device('cpu'))
        'mmtnt with the CPU accelerator'
    """
    if device.type != 'cpu':
        return 'plain mmtnt'
    if args.cpu_accel:
        return 'mmtnt with the CPU accelerator'
    return 'mmtnt without the CPU accelerator (--no-cpu-accel)'


def malloc_note(args):
    """How the C allocator handled freed memory during the measurements.

    Args:
        args (argparse.Namespace): With ``malloc``, from :func:`set_malloc`.

    Returns:
        str: The note.

    Examples:
        >>> import argparse
        >>> malloc_note(argparse.Namespace(malloc='keep'))
        'malloc keeps freed memory'
    """
    return {
        'keep': 'malloc keeps freed memory',
        'release': 'malloc gives freed memory back at once (memory mode)',
        'default': 'glibc\'s default malloc',
    }[args.malloc]


def device_description(device):
    """The device and the library versions, in words.

    Args:
        device (torch.device): A CPU or a CUDA device.

    Returns:
        str: The GPU's name with the torch, CUDA and cuDNN versions, or the
        CPU's model name with its cores and the torch version.

    Examples:
        >>> device_description(torch.device('cpu'))  # doctest: +SKIP
        'Intel(R) Xeon(R) ... (2 cores), torch 2.13.0'
    """
    versions = f'torch {torch.__version__}'
    if device.type == 'cuda':
        cudnn = torch.backends.cudnn.version()
        return (f'{torch.cuda.get_device_name(device)}, {versions}, CUDA '
                f'{torch.version.cuda}, cuDNN {cudnn // 10000}.'
                f'{cudnn // 100 % 100}.{cudnn % 100}')
    model = 'CPU'
    with open('/proc/cpuinfo') as cpuinfo:
        for line in cpuinfo:
            if line.startswith('model name'):
                model = line.split(':', 1)[1].strip()
                break
    return f'{model} ({os.cpu_count()} cores), {versions}'
