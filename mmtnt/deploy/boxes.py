"""Boxes in exported detector graphs: decoding, image sizes, NMS, and checks
that mmdet's heads decode and suppress as these functions do."""
import math

import torch
import torchvision

#: The box coder the heads must use.
BOX_CODER = 'DeltaXYWHBBoxCoder'
#: ``DeltaXYWHBBoxCoder.decode``'s default, which mmdet's heads keep.
WH_RATIO_CLIP = 16 / 1000


def decode_boxes(coder, priors, deltas, img_shape):
    """Boxes (N, 4) from priors and deltas as mmdet's ``DeltaXYWHBBoxCoder``
    decodes them with ``max_shape=img_shape``."""
    check_box_coder(coder)
    deltas = deltas * deltas.new_tensor(coder.stds) + deltas.new_tensor(
        coder.means)
    centers = (priors[:, :2] + priors[:, 2:]) * 0.5
    sizes = priors[:, 2:] - priors[:, :2]
    max_ratio = abs(math.log(WH_RATIO_CLIP))
    centers = centers + sizes * deltas[:, :2]
    sizes = sizes * deltas[:, 2:].clamp(min=-max_ratio, max=max_ratio).exp()
    boxes = torch.cat([centers - sizes * 0.5, centers + sizes * 0.5], dim=-1)
    if not coder.clip_border:
        return boxes
    limits = size_tensor(img_shape).flip(0).repeat(2).to(boxes)
    return torch.minimum(boxes.clamp(min=0), limits)


def size_tensor(img_shape):
    """``img_shape`` (H, W) as an int64 tensor (2, )."""
    if isinstance(img_shape, torch.Tensor):
        return img_shape
    return torch.stack([torch.full((), size) for size in img_shape])


def image_size(pad_shape, img_shape=None):
    """mmdet's ``img_shape`` of an input of ``pad_shape``: ``img_shape``
    capped at ``pad_shape``, or ``pad_shape`` without it."""
    if img_shape is None:
        return tuple(pad_shape)
    return torch.minimum(img_shape, size_tensor(pad_shape))


def boxes_to_rois(boxes):
    """mmdet's RoIs (N, 5) of one image: batch index 0 then the box."""
    return torch.cat([boxes.new_zeros(boxes.size(0), 1), boxes], dim=1)


def keep_large(boxes, min_size, *values):
    """The boxes wider and higher than ``min_size`` (all when it is negative),
    with the matching rows of ``values``."""
    if min_size < 0:
        return (boxes, *values)
    sizes = boxes[:, 2:] - boxes[:, :2]
    large = (sizes > min_size).all(dim=1)
    return tuple(v[large] for v in (boxes, *values))


def nms_by_group(boxes, scores, groups, nms_cfg):
    """mmcv's ``batched_nms``: NMS within each group (class or level).

    Args:
        boxes (Tensor): (N, 4) xyxy, N may be 0.
        scores (Tensor): (N, ).
        groups (Tensor): (N, ) int64.
        nms_cfg (dict): ``iou_threshold``, ``type`` ('nms') and
            ``class_agnostic``, as in mmdet's test configs.

    Returns:
        Tensor: Indices of the kept boxes, by decreasing score.

    Examples:
        >>> boxes = torch.tensor([[0., 0, 10, 10], [1, 0, 10, 10]] * 2)
        >>> nms_by_group(boxes, torch.tensor([.9, .8, .7, .6]),
        ...              torch.tensor([0, 0, 1, 1]),
        ...              dict(iou_threshold=0.5)).tolist()
        [0, 2]
    """
    check_nms(nms_cfg)
    if not nms_cfg.get('class_agnostic', False):
        # As mmcv: the largest coordinate plus 1 apart (0 for no boxes).
        top = torch.cat([boxes.reshape(-1), boxes.new_zeros(1)]).max()
        boxes = boxes + (groups.to(boxes) * (top + 1))[:, None]
    return torchvision.ops.nms(boxes, scores, nms_cfg['iou_threshold'])


def check_box_coder(coder):
    """Raise a ValueError unless ``coder`` is :data:`BOX_CODER` without
    ``add_ctr_clamp``."""
    if type(coder).__name__ != BOX_CODER or coder.add_ctr_clamp:
        raise ValueError(f'Only {BOX_CODER} (without add_ctr_clamp) is '
                         f'exported, got {type(coder).__name__}.')


def check_nms(nms_cfg):
    """Raise a ValueError unless ``nms_cfg`` asks for plain NMS."""
    nms_type = nms_cfg.get('type', 'nms')
    if nms_type != 'nms':
        raise ValueError("Only plain NMS (type='nms') is exported, got "
                         f'{nms_type!r}.')
