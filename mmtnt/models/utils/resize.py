"""Bicubic resizing of learned position terms, by ``F.interpolate`` or by
two matrix products (:data:`RESIZE_IMPLS`)."""
import torch
import torch.nn.functional as F

#: ``'interpolate'`` (``F.interpolate``, the default) or ``'matrices'``
#: (``rows @ grid @ cols^T``, :func:`bicubic_matrix`: the same result).
RESIZE_IMPLS = ('interpolate', 'matrices')
#: The ``a`` of PyTorch's (and ONNX's) cubic convolution kernel.
CUBIC_A = -0.75


def check_resize_impl(impl):
    """Raise a ValueError unless ``impl`` is one of :data:`RESIZE_IMPLS`."""
    if impl not in RESIZE_IMPLS:
        raise ValueError(f'Unknown resize implementation {impl!r}: choose '
                         f'one of {RESIZE_IMPLS}.')


def cubic_weights(t):
    """The weights (..., 4) of the taps ``floor(x) - 1 .. floor(x) + 2`` of
    PyTorch's cubic convolution at fractional parts ``t`` (..., ).

    Examples:
        >>> cubic_weights(torch.tensor([0., 0.5]))
        tensor([[ 0.0000,  1.0000,  0.0000,  0.0000],
                [-0.0938,  0.5938,  0.5938, -0.0938]])
    """
    a = CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return torch.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], -1)


def bicubic_matrix(in_size, out_size, x):
    """The (out_size, in_size) matrix of PyTorch's bicubic interpolation
    along one axis, in the dtype and on the device of ``x``.

    Examples:
        >>> m = bicubic_matrix(4, 6, torch.zeros(1))
        >>> m.shape, torch.allclose(m.sum(1), torch.ones(6))
        (torch.Size([6, 4]), True)
    """
    position = torch.arange(out_size, device=x.device, dtype=x.dtype)
    source = (position + 0.5) * (in_size / out_size) - 0.5
    first = source.floor()
    weights = cubic_weights(source - first)
    taps = (first[:, None] + torch.arange(-1, 3, device=x.device)).clamp(
        0, in_size - 1)
    columns = torch.arange(in_size, device=x.device, dtype=x.dtype)
    one_hot = (taps[..., None] == columns).to(x.dtype)
    return (weights[..., None] * one_hot).sum(1)


def resize_bicubic(grid, size, impl='interpolate'):
    """Resize maps ``grid`` (N, C, H, W) bicubically to ``size``
    (``align_corners=False``) by ``impl``, one of :data:`RESIZE_IMPLS`.

    Examples:
        >>> x = torch.rand(1, 3, 8, 8)
        >>> torch.allclose(resize_bicubic(x, (5, 12), 'matrices'),
        ...                resize_bicubic(x, (5, 12)), atol=1e-6)
        True
    """
    check_resize_impl(impl)
    if impl == 'interpolate':
        return F.interpolate(
            grid, size=size, mode='bicubic', align_corners=False)
    rows = bicubic_matrix(grid.shape[-2], size[0], grid)
    cols = bicubic_matrix(grid.shape[-1], size[1], grid)
    return rows @ grid @ cols.transpose(0, 1)


def set_resize_impl(model, impl):
    """Set the ``resize_impl`` of every module of ``model`` that has one
    (TNT's and PyramidTNT's backbones).

    Args:
        model (nn.Module): Changed in place, and returned.
        impl (str): One of :data:`RESIZE_IMPLS`, else a ValueError.

    Examples:
        >>> from mmtnt.models import TNT, set_resize_impl
        >>> set_resize_impl(TNT(arch='s'), 'matrices').resize_impl
        'matrices'
    """
    check_resize_impl(impl)
    for module in model.modules():
        if hasattr(module, 'resize_impl'):
            module.resize_impl = impl
    return model
