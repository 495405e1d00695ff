"""What the analysis tools' command lines share: the device, the input size,
the C allocator's setting, and the lines that describe a run."""
import os

import torch

from mmtnt.accel import keep_freed_memory, release_freed_memory


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


def checked_img_size(parser, img_size):
    """``--img-size`` (one side, or H W) as (H, W); None stays None.

    Args:
        parser (argparse.ArgumentParser): Reports a bad value.
        img_size (list[int], optional): The parsed values.

    Returns:
        tuple[int, int] | None: The input size.

    Examples:
        >>> import argparse
        >>> checked_img_size(argparse.ArgumentParser(), [64])
        (64, 64)
    """
    if img_size is None:
        return None
    if len(img_size) not in (1, 2) or min(img_size) < 1:
        parser.error('--img-size takes one positive side or H W, got '
                     f'{img_size}.')
    return tuple(img_size * (3 - len(img_size)))


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
