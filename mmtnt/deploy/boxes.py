"""Boxes in exported detector graphs (:mod:`mmtnt.deploy.detection`,
:mod:`mmtnt.deploy.roi_heads`): decoding, image sizes, NMS, and the checks
that mmdet's heads decode and suppress as these functions do.
"""
import math

import torch
import torchvision

#: The box coder the heads must use.
BOX_CODER = 'DeltaXYWHBBoxCoder'
#: ``DeltaXYWHBBoxCoder.decode``'s default, which mmdet's heads keep.
WH_RATIO_CLIP = 16 / 1000


def decode_boxes(coder, priors, deltas, img_shape):
    """Boxes from priors and deltas as mmdet's ``DeltaXYWHBBoxCoder``
    (without ``add_ctr_clamp``) decodes them with ``max_shape=img_shape``.

    Args:
        coder (DeltaXYWHBBoxCoder): The head's box coder.
        priors (Tensor): (N, 4) xyxy.
        deltas (Tensor): (N, 4).
        img_shape (tuple | Tensor): Height and width: ints, symbolic
            sizes or an int tensor (2, ).

    Returns:
        Tensor: (N, 4) xyxy.

    Examples:
        >>> from mmdet.models.task_modules import DeltaXYWHBBoxCoder
        >>> decode_boxes(DeltaXYWHBBoxCoder(), torch.tensor([[0., 0, 8, 8]]),
        ...              torch.tensor([[0.5, 0, 0, 0]]), (10, 10)).tolist()
        [[4.0, 0.0, 10.0, 8.0]]
    """
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
    """``img_shape`` (H, W), ints or symbolic sizes, as an int64 tensor
    (2, ); a tensor is returned as it is.

    Examples:
        >>> size_tensor((96, 128)).tolist()
        [96, 128]
    """
    if isinstance(img_shape, torch.Tensor):
        return img_shape
    return torch.stack([torch.full((), size) for size in img_shape])


def image_size(pad_shape, img_shape=None):
    """mmdet's ``img_shape`` of a maybe padded input of size ``pad_shape``.

    Args:
        pad_shape (tuple): The input's height and width.
        img_shape (Tensor, optional): (2, ) int64, the image's size before
            padding, capped at ``pad_shape``.

    Returns:
        tuple | Tensor: ``pad_shape`` without ``img_shape``, else the
        capped tensor (2, ).

    Examples:
        >>> image_size((96, 128), torch.tensor([90, 200])).tolist()
        [90, 128]
    """
    if img_shape is None:
        return tuple(pad_shape)
    return torch.minimum(img_shape, size_tensor(pad_shape))


def boxes_to_rois(boxes):
    """mmdet's RoIs of one image: (N, 5), batch index 0 then the box.

    Examples:
        >>> boxes_to_rois(torch.tensor([[1., 2, 3, 4]])).tolist()
        [[0.0, 1.0, 2.0, 3.0, 4.0]]
    """
    return torch.cat([boxes.new_zeros(boxes.size(0), 1), boxes], dim=1)


def keep_large(boxes, min_size, *values):
    """Drop the boxes not wider and higher than ``min_size`` (nothing when
    it is negative), with the matching rows of ``values``.

    Examples:
        >>> boxes = torch.tensor([[0., 0, 4, 4], [0, 0, 1, 9]])
        >>> kept, names = keep_large(boxes, 2, torch.tensor([7, 8]))
        >>> names.tolist()
        [7]
    """
    if min_size < 0:
        return (boxes, *values)
    sizes = boxes[:, 2:] - boxes[:, :2]
    large = (sizes > min_size).all(dim=1)
    return tuple(v[large] for v in (boxes, *values))


def nms_by_group(boxes, scores, groups, nms_cfg):
    """mmcv's ``batched_nms``: NMS within each group (class or level),
    through one NMS on boxes shifted apart by group.

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
    """Raise a ValueError unless :func:`decode_boxes` decodes as
    ``coder``: a :data:`BOX_CODER` without ``add_ctr_clamp``."""
    if type(coder).__name__ != BOX_CODER or coder.add_ctr_clamp:
        raise ValueError(f'Only {BOX_CODER} (without add_ctr_clamp) is '
                         f'exported, got {type(coder).__name__}.')


def check_nms(nms_cfg):
    """Raise a ValueError unless ``nms_cfg`` asks for plain NMS."""
    nms_type = nms_cfg.get('type', 'nms')
    if nms_type != 'nms':
        raise ValueError("Only plain NMS (type='nms') is exported, got "
                         f'{nms_type!r}.')
