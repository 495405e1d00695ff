"""The measuring core of every benchmark: interleaved rounds, their medians
and per-round ratios, and peak memory on the CPU and on CUDA.

A runner is a callable that runs once and returns what it measured
(seconds, bytes, or a tuple of them). :func:`interleaved_rounds` warms
every runner up and then runs them in turns, the order rotating every
round, so that a change of machine load hits all of them alike;
:func:`ratio_cell` then compares two of them round by round, so that slow
drifts cancel. :func:`timed` makes a runner of a callable that does not
time itself; :func:`step_runner` one of a classifier's forward pass or
train step.

Examples:
    >>> seconds = iter([0.02, 0.01, 0.04, 0.02])
    >>> values = interleaved_rounds(dict(a=lambda: next(seconds),
    ...                                  b=lambda: next(seconds)),
    ...                             warmup=0, rounds=2)
    >>> values, ratio_cell(values['a'], values['b'], peer_over_own=True)
    ({'a': [0.02, 0.02], 'b': [0.01, 0.04]}, '1.25 (0.50-2.00)')
"""
import statistics
import time
from functools import partial

import torch
import torch.nn.functional as F

from mmtnt.accel.linear import onednn_matmul


def synchronize(device):
    """Wait for the kernels queued on ``device`` (a no-op off CUDA).

    Args:
        device (torch.device | None): Where the work runs.

    Examples:
        >>> synchronize(torch.device('cpu'))
    """
    if device is not None and device.type == 'cuda':
        torch.cuda.synchronize(device)


def timed(run, device=None, clock=time.perf_counter):
    """Call ``run()`` and return the wall seconds it took, the device
    synchronized before and after.

    Args:
        run (Callable[[], Any]): What to time.
        device (torch.device, optional): Synchronized around the call.
        clock (Callable[[], float]): The clock read before and after.

    Returns:
        float: Seconds.

    Examples:
        >>> ticks = iter([1.0, 1.5])
        >>> timed(lambda: None, clock=lambda: next(ticks))
        0.5
    """
    synchronize(device)
    start = clock()
    run()
    synchronize(device)
    return clock() - start


def interleaved_rounds(runners, warmup, rounds):
    """Run each runner ``warmup`` times, then all of them in ``rounds``
    rounds, the order rotating by one every round.

    Args:
        runners (dict): Name -> a callable that runs once and returns what
            it measured.
        warmup (int): Unmeasured calls of each runner first, in order.
        rounds (int): Measured calls of each runner.

    Returns:
        dict: Name -> the values its measured calls returned, in order.

    Examples:
        >>> calls = []
        >>> values = interleaved_rounds(
        ...     dict(a=lambda: calls.append('a') or 1,
        ...          b=lambda: calls.append('b') or 2), warmup=0, rounds=2)
        >>> values, calls
        ({'a': [1, 1], 'b': [2, 2]}, ['a', 'b', 'b', 'a'])
    """
    for run in runners.values():
        for _ in range(warmup):
            run()
    values = {name: [] for name in runners}
    order = list(runners)
    for round_index in range(rounds):
        shift = round_index % len(order)
        for name in order[shift:] + order[:shift]:
            values[name].append(runners[name]())
    return values


def time_runs(runners, warmup, rounds, device=None):
    """:func:`interleaved_rounds` of callables that do not time themselves.

    Args:
        runners (dict): Name -> a callable running once.
        warmup (int): Untimed calls of each first.
        rounds (int): Timed calls of each.
        device (torch.device, optional): Synchronized around every call.

    Returns:
        dict: Name -> list of the seconds of its timed calls.

    Examples:
        >>> len(time_runs(dict(noop=lambda: None), warmup=1, rounds=3)[
        ...     'noop'])
        3
    """
    return interleaved_rounds(
        {name: partial(timed, run, device)
         for name, run in runners.items()}, warmup, rounds)


def ratio_cell(values, reference, peer_over_own):
    """The per-round ratios of two measurements taken in the same rounds:
    their median and, over several rounds, their range.

    Args:
        values (list[float]): A peer's value of each round.
        reference (list[float]): The own value of the same rounds.
        peer_over_own (bool): ``values / reference`` (times: above 1 means
            the own is faster), else ``reference / values`` (memory: below
            1 means the own needs less).

    Returns:
        str: ``'1.23'`` for one round, else ``'median (lowest-highest)'``.

    Examples:
        >>> ratio_cell([2., 3., 4.], [1., 2., 2.], peer_over_own=True)
        '2.00 (1.50-2.00)'
    """
    ratios = [
        peer / own if peer_over_own else own / peer
        for peer, own in zip(values, reference)
    ]
    if len(ratios) == 1:
        return f'{ratios[0]:.2f}'
    return (f'{statistics.median(ratios):.2f} '
            f'({min(ratios):.2f}-{max(ratios):.2f})')


def format_times(seconds):
    """``median (fastest-slowest)`` in whole milliseconds.

    Args:
        seconds (list[float]): The times of the runs.

    Returns:
        str: The cell.

    Examples:
        >>> format_times([0.012, 0.010, 0.015])
        '12 (10-15)'
    """
    ms = [s * 1e3 for s in seconds]
    return f'{statistics.median(ms):.0f} ({min(ms):.0f}-{max(ms):.0f})'


def resident_bytes(key):
    """A memory figure of this process (``VmRSS``, ``VmHWM``) in bytes
    (Linux).

    Examples:
        >>> resident_bytes('VmRSS') > 0
        True
    """
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith(key + ':'):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f'{key} is not in /proc/self/status.')


def reset_resident_peak():
    """Restart the peak resident memory (``VmHWM``) from the current one."""
    with open('/proc/self/clear_refs', 'w') as clear_refs:
        clear_refs.write('5')


def peak_added_bytes(run, device):
    """Call ``run()``; return what it returned and the memory it added at
    its peak.

    On a GPU the added memory is ``torch.cuda.max_memory_allocated`` minus
    what was allocated before; on the CPU the peak resident memory
    (``VmHWM``, Linux only) minus the resident memory before. On the CPU,
    freed blocks that ``malloc`` keeps count too, unless
    :func:`mmtnt.accel.release_freed_memory` was called.

    Args:
        run (Callable[[], Any]): What to measure.
        device (torch.device): Where it allocates.

    Returns:
        tuple[Any, int]: ``run()``'s value and the bytes.

    Examples:
        >>> _, added = peak_added_bytes(lambda: torch.ones(2**24),
        ...                             torch.device('cpu'))
    """
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        value = run()
        return value, torch.cuda.max_memory_allocated(device) - before
    before = resident_bytes('VmRSS')
    reset_resident_peak()
    value = run()
    return value, resident_bytes('VmHWM') - before


def forward_pass(model, images, autocast):
    """One forward pass under ``torch.no_grad()`` and ``autocast()``."""
    with torch.no_grad(), autocast():
        model(images)


def train_step(model, optimizer, images, labels, autocast):
    """One train step: forward, cross-entropy, backward and
    ``optimizer.step()``.

    Args:
        model (nn.Module): A classifier returning logits.
        optimizer (torch.optim.Optimizer): Over its parameters.
        images (Tensor): The batch.
        labels (Tensor): Its class indices.
        autocast (Callable[[], ContextManager]): The precision context of
            the forward pass and the loss.

    Examples:
        >>> import contextlib
        >>> model = torch.nn.Linear(4, 3)
        >>> train_step(model, torch.optim.SGD(model.parameters(), lr=0.1),
        ...            torch.randn(2, 4), torch.tensor([0, 2]),
        ...            contextlib.nullcontext)
    """
    optimizer.zero_grad(set_to_none=True)
    with autocast():
        loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()


def random_batch(batch_size, img_size, device):
    """Random images and 1000-class labels of one batch.

    Args:
        batch_size (int): Images.
        img_size (tuple[int, int]): Their (H, W).
        device (torch.device): Where the tensors live.

    Returns:
        tuple[Tensor, Tensor]: Standard-normal images (N, 3, H, W) and
        labels (N, ).

    Examples:
        >>> images, labels = random_batch(2, (32, 48), torch.device('cpu'))
        >>> images.shape, labels.shape
        (torch.Size([2, 3, 32, 48]), torch.Size([2]))
    """
    images = torch.randn(batch_size, 3, *img_size, device=device)
    labels = torch.randint(0, 1000, (batch_size, ), device=device)
    return images, labels


def new_optimizer(model):
    """AdamW as the configs build it: PyTorch's fused implementation.

    Examples:
        >>> optimizer = new_optimizer(torch.nn.Linear(4, 2))
    """
    return torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)


def step_runner(mode, model, images, labels, autocast, optimizer=None):
    """A runner timing one forward pass or one train step of ``model``.

    Args:
        mode (str): ``'forward'`` (``model.eval()``, no gradients) or
            ``'train'`` (``model.train()``, a step of ``optimizer``).
        model (nn.Module): A classifier returning logits.
        images (Tensor): The batch.
        labels (Tensor): Its class indices (``'train'`` only).
        autocast (Callable[[], ContextManager]): The precision context.
        optimizer (torch.optim.Optimizer, optional): For ``'train'``.

    Returns:
        Callable[[], float]: Runs one step and returns its seconds.

    Examples:
        >>> import contextlib
        >>> run = step_runner('forward', torch.nn.Linear(4, 3),
        ...                   torch.randn(2, 4), None,
        ...                   contextlib.nullcontext)
        >>> run() > 0
        True
    """
    if mode == 'forward':
        step = partial(forward_pass, model.eval(), images, autocast)
    else:
        step = partial(train_step, model.train(), optimizer, images, labels,
                       autocast)
    return partial(timed, step, images.device)


def train_step_memory(model, optimizer, images, labels, autocast):
    """The bytes one train step adds at its peak: after one step that
    creates the optimizer state, with the gradients freed, the peak of a
    second step minus what was allocated before it
    (:func:`peak_added_bytes`).

    Args:
        model (nn.Module): A classifier returning logits, in train mode.
        optimizer (torch.optim.Optimizer): Over its parameters.
        images (Tensor): The batch.
        labels (Tensor): Its class indices.
        autocast (Callable[[], ContextManager]): The precision context.

    Returns:
        int: Bytes.

    Examples:
        >>> import contextlib
        >>> model = torch.nn.Linear(4, 3)
        >>> added = train_step_memory(
        ...     model, torch.optim.SGD(model.parameters(), lr=0.1),
        ...     torch.randn(2, 4), torch.tensor([0, 2]),
        ...     contextlib.nullcontext)
    """
    step = partial(train_step, model, optimizer, images, labels, autocast)
    step()  # optimizer state exists from here on
    optimizer.zero_grad(set_to_none=True)
    return peak_added_bytes(step, images.device)[1]


def matmul_peak(dtype, device, size=2048, repeats=10):
    """The best GFLOP/s of ``size`` x ``size`` matrix products.

    On the CPU both of PyTorch's product routines count: ``torch.mm`` (the
    BLAS) and oneDNN's matmul, whichever is faster on the machine.

    Args:
        dtype (torch.dtype): The element type.
        device (torch.device): Where to multiply.
        size (int): Side of the square matrices.
        repeats (int): Products timed per routine; the fastest counts.

    Returns:
        float: GFLOP/s (2 FLOPs per multiply-add).

    Examples:
        >>> peak = matmul_peak(torch.float32, torch.device('cpu'), size=256,
        ...                    repeats=2)
    """
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    products = [partial(torch.mm, a, b)]
    if device.type == 'cpu' and torch.backends.mkldnn.is_available():
        products.append(partial(onednn_matmul, a, b))
    best = min(
        timed(product, device) for product in products
        for _ in range(repeats))
    return 2 * size**3 / best / 1e9
