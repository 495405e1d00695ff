"""Size arithmetic that stays valid when sizes are symbolic.

Under ``torch.export`` the sizes read from ``tensor.shape`` are symbols. A
Python ``if`` on such a size would tie the exported graph to the example
input, and ``-(-a // b)`` becomes a division that truncates. The helpers
here take a shortcut only when it is known to apply for every input, which
is always the case for plain integers.
"""
import torch
import torch.nn.functional as F
from torch.fx.experimental.symbolic_shapes import statically_known_true


def _known_true(condition):
    """Whether ``condition`` (a bool, or a SymBool of torch.export) holds
    for certain. Under ``torch.jit.trace``, whose sizes are 0-dim tensors,
    the traced example's value decides, as a plain ``if`` would."""
    if isinstance(condition, torch.Tensor):
        return bool(condition)
    return statically_known_true(condition)


def ceil_div(size, divisor):
    """``ceil(size / divisor)`` for a non-negative size, in integers only.

    Args:
        size (int | torch.SymInt): A size, at least 0.
        divisor (int): A positive integer.

    Returns:
        int | torch.SymInt: The rounded-up quotient.

    Examples:
        >>> ceil_div(225, 4), ceil_div(224, 4)
        (57, 56)
    """
    return (size + divisor - 1) // divisor


def known_zero(*sizes):
    """Whether every size is 0 for certain: its value for integers; for
    symbolic sizes, only if that holds for all values of the symbols (no
    guard is recorded).

    Args:
        *sizes (int | torch.SymInt): Sizes, e.g. paddings.

    Returns:
        bool: True when all of them are known to be 0.

    Examples:
        >>> known_zero(0, 0), known_zero(0, 3)
        (True, False)
    """
    return all(_known_true(size == 0) for size in sizes)


def known_equal(shape_a, shape_b):
    """Whether two shapes are equal for certain: their values for integers;
    for symbolic sizes, only if that holds for all values of the symbols
    (no guard is recorded).

    Args:
        shape_a (Sequence[int | torch.SymInt]): A shape.
        shape_b (Sequence[int | torch.SymInt]): Another shape.

    Returns:
        bool: True when the shapes are known to be equal.

    Examples:
        >>> known_equal((14, 14), (14, 14)), known_equal((14, 14), (14, 20))
        (True, False)
    """
    shape_a, shape_b = tuple(shape_a), tuple(shape_b)
    return len(shape_a) == len(shape_b) and all(
        _known_true(a == b) for a, b in zip(shape_a, shape_b))


def pad_to_multiple(x, multiple, dims=(-2, -1)):
    """Zero-pad ``dims`` of ``x`` at their end up to multiples of
    ``multiple``: the right and bottom of a map, so that no pixel or token
    is dropped by a patch, window or pairing that follows.

    Args:
        x (Tensor): The tensor.
        multiple (int): A positive integer.
        dims (tuple[int]): The dimensions to pad, e.g. ``(-2, -1)`` for the
            height and width of (B, C, H, W), ``(1, 2)`` for those of
            (B, H, W, C). Defaults to ``(-2, -1)``.

    Returns:
        Tensor: ``x`` itself when nothing needs padding, else a padded
        copy.

    Examples:
        >>> import torch
        >>> pad_to_multiple(torch.ones(1, 3, 30, 41), 4).shape
        torch.Size([1, 3, 32, 44])
        >>> pad_to_multiple(torch.ones(2, 5, 7, 8), 2, dims=(1, 2)).shape
        torch.Size([2, 6, 8, 8])
    """
    dims = sorted(dim % x.dim() for dim in dims)
    pads = {
        dim: ceil_div(x.shape[dim], multiple) * multiple - x.shape[dim]
        for dim in dims
    }
    if known_zero(*pads.values()):
        return x
    # F.pad takes (before, after) pairs from the last dimension backwards.
    widths = []
    for dim in range(x.dim() - 1, dims[0] - 1, -1):
        widths += [0, pads.get(dim, 0)]
    return F.pad(x, widths)
