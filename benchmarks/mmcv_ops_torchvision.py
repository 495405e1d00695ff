"""A stand-in for ``mmcv._ext`` built on torchvision's operators.

mmcv's operators (``mmcv.ops``) call the compiled extension ``mmcv._ext``,
and mmdet and mmseg import ``mmcv.ops`` as they are imported. A machine
whose mmcv was installed without compiled ops (``MMCV_WITH_OPS=0``, or a
pure-Python wheel, as on GPU benchmark machines that have no mmcv build
for their torch and CUDA) therefore cannot import mmdet or mmseg at all.

Put in place as ``mmcv._ext``, this module provides the extension functions
that training and testing Mask R-CNN (mmdet) and UperNet (mmseg) call,
computed with torchvision's operators on any device torchvision supports:

- ``nms``: ``torchvision.ops.nms`` (``offset=0`` only, which mmdet uses);
- ``roi_align_forward``: ``torchvision.ops.roi_align`` (``'avg'`` pooling
  only, which mmdet's RoI extractors and mask targets use);
- ``roi_align_backward``: the input gradient of
  ``torchvision.ops.roi_align``, by ``torch.autograd``.

They keep mmcv's signatures: the RoIAlign functions write into the
``output`` and ``grad_input`` tensors mmcv allocates, and ``nms`` returns
the kept indices in descending order of score, as mmcv's kernels do.
Every other name of the extension resolves (PEP 562 ``__getattr__``) to a
function that raises ``NotImplementedError`` naming the operator, so
``mmcv.ops`` imports (it only checks the names exist) and a model needing
another operator fails clearly when it calls it.

Timings taken with the stand-in measure torchvision's RoIAlign and NMS
kernels, not mmcv's: report them as such. Results agree with mmcv's
kernels (``tests/test_tools/test_mmcv_ops_torchvision.py`` compares them
with a compiled mmcv); where several boxes have equal scores, NMS may keep
them in another order.

A benchmark puts it in place for its own process with :func:`install`,
before ``mmcv.ops`` is imported; no installed package's files change.
"""
import importlib
import sys

import torch
import torchvision

__all__ = ['nms', 'roi_align_forward', 'roi_align_backward', 'install']

#: The extension functions this module computes; every other name raises.
PROVIDED = ('nms', 'roi_align_forward', 'roi_align_backward')

# mmcv's ``pool_mode`` codes (``mmcv/ops/roi_align.py``).
_POOL_MODES = {0: 'max', 1: 'avg', 'max': 'max', 'avg': 'avg'}


def _unsupported(what):
    """Raise ``NotImplementedError`` for a case the stand-in lacks.

    Args:
        what (str): The operator or variant that was asked for.
    """
    raise NotImplementedError(
        f'{what} is not available: this machine\'s mmcv has no compiled '
        f'ops, and mmcv._ext is the torchvision stand-in {__file__}, '
        f'which provides only {", ".join(PROVIDED)} (NMS with offset=0, '
        f'RoIAlign with pool_mode="avg")')


def nms(boxes, scores, iou_threshold, offset=0):
    """Non-maximum suppression, mmcv's ``_ext.nms``.

    Args:
        boxes (Tensor): Boxes ``(N, 4)`` as ``x1, y1, x2, y2``.
        scores (Tensor): Their scores ``(N,)``.
        iou_threshold (float): A box whose IoU with a kept box of a higher
            score is above this is dropped.
        offset (int): mmcv's legacy ``+1`` of box sizes; only 0 is
            supported.

    Returns:
        Tensor: The indices (int64) of the kept boxes, by descending score.

    Examples:
        >>> boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 10., 10.],
        ...                       [20., 20., 30., 30.]])
        >>> nms(boxes, torch.tensor([0.9, 0.8, 0.7]), iou_threshold=0.5)
        tensor([0, 2])
    """
    if offset != 0:
        _unsupported(f'nms with offset={offset!r} (only offset=0)')
    if boxes.numel() == 0:
        return boxes.new_empty((0, ), dtype=torch.long)
    return torchvision.ops.nms(boxes, scores.to(boxes.dtype),
                               float(iou_threshold))


def _roi_align(input, rois, aligned_height, aligned_width, spatial_scale,
               sampling_ratio, pool_mode, aligned):
    """``torchvision.ops.roi_align`` with mmcv's arguments."""
    mode = _POOL_MODES.get(pool_mode)
    if mode != 'avg':
        _unsupported(f'roi_align with pool_mode={pool_mode!r} '
                     f'({mode or "unknown"}; only avg)')
    if rois.dim() != 2 or rois.size(1) != 5:
        raise ValueError('RoIs must be (K, 5): (batch index, x1, y1, x2, '
                         f'y2), got shape {tuple(rois.shape)}')
    # mmcv's ``sampling_ratio=0`` (adaptive) is torchvision's ``<= 0``.
    return torchvision.ops.roi_align(
        input,
        rois.to(input.dtype),
        (int(aligned_height), int(aligned_width)),
        spatial_scale=float(spatial_scale),
        sampling_ratio=int(sampling_ratio),
        aligned=bool(aligned))


def roi_align_forward(input,
                      rois,
                      output,
                      argmax_y,
                      argmax_x,
                      aligned_height=0,
                      aligned_width=0,
                      spatial_scale=1.0,
                      sampling_ratio=0,
                      pool_mode=1,
                      aligned=True):
    """RoIAlign forward, mmcv's ``_ext.roi_align_forward``.

    Args:
        input (Tensor): Features ``(N, C, H, W)``.
        rois (Tensor): RoIs ``(K, 5)``: batch index, ``x1, y1, x2, y2`` in
            input-image coordinates.
        output (Tensor): ``(K, C, aligned_height, aligned_width)``, written.
        argmax_y (Tensor): Unused (max pooling only).
        argmax_x (Tensor): Unused (max pooling only).
        aligned_height (int): Output height.
        aligned_width (int): Output width.
        spatial_scale (float): Feature size over input-image size.
        sampling_ratio (int): Samples per bin side; 0 adapts to the RoI.
        pool_mode (int | str): 1 or ``'avg'``; max pooling (0) is refused.
        aligned (bool): Shift the RoIs by half a pixel (mmcv's default).

    Examples:
        >>> feats = torch.arange(16.).view(1, 1, 4, 4)
        >>> rois = torch.tensor([[0., 0., 0., 4., 4.]])
        >>> output = feats.new_zeros(1, 1, 2, 2)
        >>> roi_align_forward(feats, rois, output, None, None, 2, 2)
        >>> output
        tensor([[[[ 2.5000,  4.5000],
                  [10.5000, 12.5000]]]])
    """
    with torch.no_grad():
        output.copy_(
            _roi_align(input, rois, aligned_height, aligned_width,
                       spatial_scale, sampling_ratio, pool_mode, aligned))


def roi_align_backward(grad_output,
                       rois,
                       argmax_y,
                       argmax_x,
                       grad_input,
                       aligned_height=0,
                       aligned_width=0,
                       spatial_scale=1.0,
                       sampling_ratio=0,
                       pool_mode=1,
                       aligned=True):
    """RoIAlign backward, mmcv's ``_ext.roi_align_backward``.

    RoIAlign is linear in its input, so the gradient is that of
    torchvision's RoIAlign at an all-zero input of ``grad_input``'s shape.

    Args:
        grad_output (Tensor): ``(K, C, aligned_height, aligned_width)``.
        rois (Tensor): The forward's RoIs ``(K, 5)``.
        argmax_y (Tensor): Unused (max pooling only).
        argmax_x (Tensor): Unused (max pooling only).
        grad_input (Tensor): ``(N, C, H, W)``, overwritten with the input
            gradient.
        aligned_height (int): Output height.
        aligned_width (int): Output width.
        spatial_scale (float): Feature size over input-image size.
        sampling_ratio (int): Samples per bin side; 0 adapts to the RoI.
        pool_mode (int | str): 1 or ``'avg'``; max pooling (0) is refused.
        aligned (bool): Shift the RoIs by half a pixel.

    Examples:
        >>> rois = torch.tensor([[0., 0., 0., 4., 4.]])
        >>> grad_input = torch.zeros(1, 1, 4, 4)
        >>> roi_align_backward(torch.ones(1, 1, 2, 2), rois, None, None,
        ...                    grad_input, 2, 2)
        >>> grad_input.sum()
        tensor(4.)
    """
    # mmcv calls this inside ``once_differentiable``, with grad mode off.
    with torch.enable_grad():
        input = torch.zeros(
            grad_input.shape,
            dtype=grad_output.dtype,
            device=grad_output.device,
            requires_grad=True)
        output = _roi_align(input, rois.detach(), aligned_height,
                            aligned_width, spatial_scale, sampling_ratio,
                            pool_mode, aligned)
        grad, = torch.autograd.grad(output, input, grad_output.detach())
    with torch.no_grad():
        grad_input.copy_(grad)


def __getattr__(name):
    """Every other operator of ``mmcv._ext``: a function that raises.

    Args:
        name (str): The operator's name, e.g. ``'softnms'``.

    Returns:
        callable: A function raising ``NotImplementedError`` naming it.
    """
    if name.startswith('_'):
        # Keep ``__path__``, ``__wrapped__`` etc. absent for importlib,
        # pickle and inspect.
        raise AttributeError(f'module {__name__!r} has no attribute '
                             f'{name!r}')

    def missing(*args, **kwargs):
        _unsupported(f'mmcv op {name!r}')

    missing.__name__ = missing.__qualname__ = name
    missing.__doc__ = f'mmcv op {name!r}: not available (raises).'
    return missing


def install(force=False):
    """Make this module ``mmcv._ext`` in this process
    (``sys.modules['mmcv._ext']``) where mmcv's compiled extension cannot
    be imported; call it before ``mmcv.ops`` (or mmdet, mmseg) is
    imported. No file is written: other processes are left as they are.

    Args:
        force (bool): Put the stand-in in place even where mmcv's compiled
            ops import (the tests compare the two). Defaults to False.

    Returns:
        bool: Whether the stand-in is now ``mmcv._ext`` (False: mmcv's
        compiled ops import, and were left in place).

    Raises:
        RuntimeError: ``mmcv.ops`` was imported before with another
            ``mmcv._ext`` (with ``force``), or this module is not imported
            as a module.

    Examples:
        >>> from benchmarks import mmcv_ops_torchvision
        >>> mmcv_ops_torchvision.install()  # no compiled ops: stand-in used
        True
        >>> import mmdet.models  # imports mmcv.ops
    """
    module = sys.modules.get(__name__)
    if module is None or vars(module) is not globals():
        raise RuntimeError(
            f'{__name__} is not in sys.modules: import it as a module '
            '(benchmarks.mmcv_ops_torchvision) before install()')
    current = sys.modules.get('mmcv._ext')
    if current is module:
        return True
    import mmcv
    if not force:
        try:
            importlib.import_module('mmcv._ext')
            return False
        except ImportError:
            pass  # none, or built for another torch: the stand-in
    if 'mmcv.ops' in sys.modules:
        raise RuntimeError(
            'mmcv.ops is imported already, with mmcv._ext = '
            f'{current!r}; install the stand-in before importing '
            'mmcv.ops, mmdet or mmseg')
    # mmcv's compiled extension is missing here (an mmcv built without
    # ops, as on machines with no mmcv build for their torch): mmcv.ops,
    # and with it mmdet and mmseg, import this stand-in instead.
    sys.modules['mmcv._ext'] = module
    mmcv._ext = module
    return True
