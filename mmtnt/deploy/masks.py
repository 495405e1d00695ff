"""Mask R-CNN's image masks from its ``roi_masks``: pasted after the graph
(:func:`paste_masks`) as mmdet's CPU paste does, or in it
(:func:`paste_masks_separable`)."""
import numpy as np
import torch
import torch.nn.functional as F


def paste_masks(roi_masks, boxes, img_shape, threshold=0.5):
    """Binary image masks from per-RoI mask probabilities, as mmdet's
    ``FCNMaskHead`` pastes them on the CPU.

    For mmdet's ``predict(..., rescale=True)``, divide the boxes by
    ``scale_factor`` in float32 and paste at ``ori_shape``.

    Args:
        roi_masks (np.ndarray | Tensor): (K, M, M) or (K, 1, M, M)
            probabilities (the graph's ``roi_masks``).
        boxes (np.ndarray | Tensor): (K, 4) x1 y1 x2 y2, float32.
        img_shape (tuple[int]): Height and width of the image masks.
        threshold (float): mmdet's ``mask_thr_binary``. Defaults to 0.5.

    Returns:
        np.ndarray | Tensor: (K, h, w) bool, NumPy for NumPy ``roi_masks``.

    Examples:
        >>> masks = paste_masks(np.ones((1, 28, 28), np.float32),
        ...                     np.array([[2., 1., 5., 3.]], np.float32),
        ...                     (4, 8))
        >>> masks.astype(int)
        array([[[0, 0, 0, 0, 0, 0, 0, 0],
                [0, 0, 1, 1, 1, 0, 0, 0],
                [0, 0, 1, 1, 1, 0, 0, 0],
                [0, 0, 0, 0, 0, 0, 0, 0]]])
    """
    as_numpy = not isinstance(roi_masks, torch.Tensor)
    roi_masks = torch.as_tensor(np.asarray(roi_masks) if as_numpy else
                                roi_masks).float()
    boxes = torch.as_tensor(boxes, device=roi_masks.device).float()
    height, width = (int(size) for size in img_shape[:2])
    roi_masks = roi_masks.reshape(len(roi_masks), 1, *roi_masks.shape[-2:])
    image_masks = torch.zeros(
        len(roi_masks), height, width, dtype=torch.bool,
        device=roi_masks.device)
    for index in range(len(roi_masks)):
        pasted, (rows, cols) = paste_mask(roi_masks[index:index + 1],
                                          boxes[index], height, width)
        image_masks[index, rows, cols] = pasted >= threshold
    return image_masks.cpu().numpy() if as_numpy else image_masks


def paste_mask(roi_mask, box, height, width):
    """mmdet's ``_do_paste_mask`` of one box (``skip_empty=True``): the
    probabilities and the (rows, cols) slices of the image they cover."""
    x0, y0 = (box[:2].floor() - 1).clamp(min=0).int().tolist()
    # Boxes wholly outside the image cover nothing (mmdet's paste fails).
    x1 = max(x0, int((box[2].ceil() + 1).clamp(max=width)))
    y1 = max(y0, int((box[3].ceil() + 1).clamp(max=height)))
    device = roi_mask.device
    img_y = torch.arange(y0, y1, device=device).float() + 0.5
    img_x = torch.arange(x0, x1, device=device).float() + 0.5
    img_y = _grid_coords(img_y, box[1], box[3])
    img_x = _grid_coords(img_x, box[0], box[2])
    grid = torch.stack([
        img_x[None, :].expand(len(img_y), len(img_x)),
        img_y[:, None].expand(len(img_y), len(img_x))
    ], dim=2)
    pasted = F.grid_sample(roi_mask, grid[None], align_corners=False)
    return pasted[0, 0], (slice(y0, y1), slice(x0, x1))


def _grid_coords(centres, lo, hi):
    """Pixel centres as ``grid_sample`` coordinates over [lo, hi]: -1 and 1
    at the ends, 0 where the box has no extent (infinite ones, as mmdet)."""
    coords = (centres - lo) / (hi - lo) * 2 - 1
    return torch.where(torch.isinf(coords), coords.new_zeros(()), coords)


def paste_masks_separable(roi_masks, boxes, img_shape):
    """Per-RoI masks (K, M, M) pasted over the image (K, h, w) as
    ``Ry @ mask @ Rx.T``: :func:`paste_masks`'s sampling as interpolation
    matrices, for export."""
    img_h, img_w = img_shape
    size_y, size_x = roi_masks.shape[-2:]
    x0, y0, x1, y1 = boxes[:, :, None].unbind(1)  # each (K, 1)
    rows = interpolation_matrix(y0, y1, img_h, size_y)
    cols = interpolation_matrix(x0, x1, img_w, size_x)
    return rows @ (roi_masks @ cols.transpose(1, 2))


def interpolation_matrix(lo, hi, size, mask_size):
    """``grid_sample``'s bilinear weights (K, size, mask_size) of the pixels
    along one axis, zero outside mmdet's pasted region."""
    zero = lo.new_zeros(())
    centres = torch.arange(size, device=lo.device).to(lo) + 0.5
    coords = _grid_coords(centres, lo, hi)  # (K, size)
    # grid_sample's unnormalisation (align_corners=False), then its
    # bilinear weights of the cells left and right of each coordinate.
    source = ((coords + 1) * mask_size - 1) / 2
    left = source.floor()
    right_weight = source - left
    cells = torch.arange(mask_size, device=lo.device).to(lo)
    weights = (torch.where(cells == left[..., None],
                           (1 - right_weight)[..., None], zero) +
               torch.where(cells == left[..., None] + 1,
                           right_weight[..., None], zero))
    first = (lo.floor() - 1).clamp(min=0)
    end = (hi.ceil() + 1).clamp(max=size)
    pasted = (centres >= first) & (centres < end)
    return torch.where(pasted[..., None], weights, zero)
