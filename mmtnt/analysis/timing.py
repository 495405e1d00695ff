"""Timing and memory of forward passes and train steps, measured in rounds
that rotate the order of what is compared.

A runner is a callable that runs one step and returns its seconds
(:func:`step_runner`); :func:`interleaved_rounds` warms every runner up and
then runs them in turns, the order rotating every round, so that a change
of machine load hits all of them alike. :func:`time_runs` does the same
for callables that do not time themselves.
"""
import time
from functools import partial

import torch
import torch.nn.functional as F

from mmtnt.accel.linear import onednn_matmul


def synchronize(device):
    """Wait for the kernels queued on ``device`` (a no-op on the CPU).

    Args:
        device (torch.device): Where the work runs.

    Examples:
        >>> synchronize(torch.device('cpu'))
    """
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_forward(model, images, autocast):
    """Seconds of one forward pass under ``torch.no_grad()``.

    Args:
        model (nn.Module): The model, in the mode it should run in.
        images (Tensor): Its input.
        autocast (Callable[[], ContextManager]): The precision context,
            e.g. ``contextlib.nullcontext``.

    Returns:
        float: Wall seconds, the device synchronized.

    Examples:
        >>> import contextlib
        >>> seconds = time_forward(torch.nn.Linear(4, 2).eval(),
        ...                        torch.randn(3, 4), contextlib.nullcontext)
    """
    with torch.no_grad(), autocast():
        start = time.perf_counter()
        model(images)
        synchronize(images.device)
        return time.perf_counter() - start


def time_train_step(model, optimizer, images, labels, autocast):
    """Seconds of one train step: forward, cross-entropy, backward and
    ``optimizer.step()``.

    Args:
        model (nn.Module): A classifier returning logits.
        optimizer (torch.optim.Optimizer): Over its parameters.
        images (Tensor): The batch.
        labels (Tensor): Its class indices.
        autocast (Callable[[], ContextManager]): The precision context of
            the forward pass and the loss.

    Returns:
        float: Wall seconds, the device synchronized.

    Examples:
        >>> import contextlib
        >>> model = torch.nn.Linear(4, 3)
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> seconds = time_train_step(model, optimizer, torch.randn(2, 4),
        ...                           torch.tensor([0, 2]),
        ...                           contextlib.nullcontext)
    """
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    with autocast():
        loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    synchronize(images.device)
    return time.perf_counter() - start


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
    """AdamW as the configs build it: PyTorch's fused (one-kernel)
    implementation.

    Args:
        model (nn.Module): Whose parameters it updates.

    Returns:
        torch.optim.AdamW: With ``lr=1e-4`` and ``fused=True``.

    Examples:
        >>> optimizer = new_optimizer(torch.nn.Linear(4, 2))
    """
    return torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)


def step_runner(mode, model, images, labels, autocast, optimizer=None):
    """A runner of one forward pass or one train step of ``model``.

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
        >>> model = torch.nn.Linear(4, 3)
        >>> run = step_runner('forward', model, torch.randn(2, 4), None,
        ...                   contextlib.nullcontext)
        >>> run() > 0
        True
    """
    if mode == 'forward':
        return partial(time_forward, model.eval(), images, autocast)
    return partial(time_train_step, model.train(), optimizer, images, labels,
                   autocast)


def interleaved_rounds(runners, warmup, rounds):
    """Run each runner ``warmup`` times, then all of them in ``rounds``
    rounds, the order rotating by one every round.

    Args:
        runners (dict): Name -> a callable that runs once and returns what
            it measured (seconds, or any value).
        warmup (int): Untimed calls of each runner first, in order.
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


def _timed(run):
    """Call ``run()`` and return the wall seconds it took."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def time_runs(runners, warmup, rounds):
    """Time callables taking turns (:func:`interleaved_rounds` for
    callables that do not time themselves; no device synchronization).

    Args:
        runners (dict): Name -> a callable running one forward.
        warmup (int): Untimed calls of each first.
        rounds (int): Timed rounds; each runs every callable once, the
            order rotating by one every round.

    Returns:
        dict: Name -> list of the seconds of its timed calls.

    Examples:
        >>> times = time_runs(dict(sleep=lambda: time.sleep(0.001)),
        ...                   warmup=1, rounds=3)
        >>> len(times['sleep'])
        3
    """
    return interleaved_rounds(
        {name: partial(_timed, run)
         for name, run in runners.items()}, warmup, rounds)


def _resident_bytes(key):
    """A memory figure of this process (``VmRSS``, ``VmHWM``) in bytes."""
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith(key + ':'):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f'{key} is not in /proc/self/status.')


def peak_added_bytes(run, device):
    """Call ``run()`` and return the memory it added at its peak.

    On a GPU it is ``torch.cuda.max_memory_allocated`` minus what was
    allocated before; on the CPU the peak resident memory (``VmHWM``, reset
    through ``/proc/self/clear_refs``, Linux only) minus the resident memory
    before. On the CPU, freed blocks that ``malloc`` keeps count too, unless
    :func:`mmtnt.accel.release_freed_memory` was called.

    Args:
        run (Callable[[], Any]): What to measure.
        device (torch.device): Where it allocates.

    Returns:
        int: Bytes.

    Examples:
        >>> added = peak_added_bytes(lambda: torch.ones(2**24),
        ...                          torch.device('cpu'))
    """
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        run()
        return torch.cuda.max_memory_allocated(device) - before
    before = _resident_bytes('VmRSS')
    with open('/proc/self/clear_refs', 'w') as clear_refs:
        clear_refs.write('5')  # reset the peak (VmHWM) to the current RSS
    run()
    return _resident_bytes('VmHWM') - before


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
    step = partial(time_train_step, model, optimizer, images, labels,
                   autocast)
    step()  # optimizer state exists from here on
    optimizer.zero_grad(set_to_none=True)
    return peak_added_bytes(step, images.device)


def matmul_peak(dtype, device, size=2048, repeats=10):
    """The best GFLOP/s of ``size`` x ``size`` matrix products.

    On the CPU both of PyTorch's product routines count: ``torch.mm`` (the
    BLAS, MKL in the official wheels) and oneDNN's matmul, whichever is
    faster on the machine that runs it.

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
    best = float('inf')
    for product in products:
        for _ in range(repeats + 1):  # the first is a warm-up
            synchronize(device)
            start = time.perf_counter()
            product()
            synchronize(device)
            best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9
