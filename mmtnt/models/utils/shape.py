"""Size arithmetic that stays valid when sizes are symbolic (under
``torch.export``): shortcuts are taken only when known to hold for every
input, so an exported graph is not tied to its example."""
import torch
import torch.nn.functional as F
from torch.fx.experimental.symbolic_shapes import statically_known_true


def _known_true(condition):
    """Whether ``condition`` (bool or SymBool) holds for certain; a
    ``torch.jit.trace`` 0-dim tensor decides by its value."""
    if isinstance(condition, torch.Tensor):
        return bool(condition)
    return statically_known_true(condition)


def ceil_div(size, divisor):
    """``ceil(size / divisor)`` for a size (int or SymInt) >= 0, in
    integers only.

    Examples:
        >>> ceil_div(225, 4), ceil_div(224, 4)
        (57, 56)
    """
    return (size + divisor - 1) // divisor


def known_zero(*sizes):
    """Whether every size (int or SymInt) is 0 for certain, recording no
    guard.

    Examples:
        >>> known_zero(0, 0), known_zero(0, 3)
        (True, False)
    """
    return all(_known_true(size == 0) for size in sizes)


def known_equal(shape_a, shape_b):
    """Whether two shapes (of ints or SymInts) are equal for certain,
    recording no guard.

    Examples:
        >>> known_equal((14, 14), (14, 14)), known_equal((14, 14), (14, 20))
        (True, False)
    """
    shape_a, shape_b = tuple(shape_a), tuple(shape_b)
    return len(shape_a) == len(shape_b) and all(
        _known_true(a == b) for a, b in zip(shape_a, shape_b))


def pad_to_multiple(x, multiple, dims=(-2, -1)):
    """Zero-pad ``dims`` of ``x`` at their end up to multiples of
    ``multiple`` (the right and bottom of a map).

    Args:
        x (Tensor): The tensor.
        multiple (int): A positive integer.
        dims (tuple[int]): The dimensions to pad. Defaults to ``(-2, -1)``.

    Returns:
        Tensor: ``x`` itself when nothing needs padding, else a padded
        copy.

    Examples:
        >>> pad_to_multiple(torch.ones(1, 3, 30, 41), 4).shape
        torch.Size([1, 3, 32, 44])
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
