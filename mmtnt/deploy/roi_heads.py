"""The second stage of Mask R-CNN and Faster R-CNN written for export:
mmdet's ``StandardRoIHead.predict`` for one image, made of operators that
``torch.export`` and ``torch.onnx.export(..., dynamo=True)`` translate to
standard ONNX (RoiAlign, NonMaxSuppression, GridSample, NonZero).

What differs from mmdet's code is only how it is computed:

- RoI features: mmcv's ``RoIAlign`` becomes ``torchvision.ops.roi_align``
  with the same output size, scale, sampling ratio and ``aligned`` flag (the
  same numbers; ONNX ``RoiAlign`` with ``coordinate_transformation_mode``
  ``'half_pixel'`` when aligned). Every RoI is pooled on every level and
  its level, chosen by ``SingleRoIExtractor.map_roi_levels``, picked with
  ``torch.where``, instead of indexing the RoIs of each level.
- Multi-class NMS: one NMS over the (box, class) pairs scoring above
  ``score_thr``, classes kept apart as ``mmcv.ops.batched_nms`` does below
  its ``split_thr`` (:func:`~mmtnt.deploy.detection.nms_by_group`).
- Masks: each mask is pasted over the whole image with ``grid_sample``,
  then cut to the region that mmdet's CPU paste (``skip_empty``) covers,
  so that the binary masks are the same. In a padded input the masks are
  pasted over the input and cut to the image before padding: the boxes
  lie within it, so what is pasted there is what mmdet pastes.
"""
import torch
import torch.nn.functional as F
from torchvision.ops import roi_align

from .detection import decode_boxes, nms_by_group

#: The bbox heads whose forward gives (class scores, box deltas) from RoI
#: features alone.
BBOX_HEADS = ('BBoxHead', 'ConvFCBBoxHead', 'Shared2FCBBoxHead',
              'Shared4Conv1FCBBoxHead')
#: The mask heads whose forward gives mask logits (K, classes, h, w).
MASK_HEADS = ('FCNMaskHead', )


def roi_head_predictions(roi_head, feats, proposals, img_shape,
                         pad_shape=None):
    """Detections of a ``StandardRoIHead`` (Mask or Faster R-CNN) for one
    image.

    The same as ``roi_head.predict(feats, rpn_results_list, data_samples,
    rescale=False)`` with the head's ``test_cfg``: boxes in the input
    image's coordinates, not scaled back to the original image.

    Args:
        roi_head (StandardRoIHead): The head (see :func:`check_roi_head`).
        feats (tuple[Tensor]): The neck's maps, each (1, C, h, w).
        proposals (Tensor): RPN boxes (P, 4), x1 y1 x2 y2 in pixels.
        img_shape (tuple[int] | Tensor): The image's (H, W), mmdet's
            ``img_shape``: the input's (sizes of a tensor,
            ``torch.SymInt``, under ``torch.export``) or, with
            ``pad_shape``, an int64 tensor (2, ) no larger than it.
        pad_shape (tuple[int], optional): The (padded) input's (H, W),
            when ``img_shape`` is a tensor.

    Returns:
        dict[str, Tensor]: ``boxes`` (K, 4), ``scores`` (K,), ``labels``
        (K,) int64, by descending score, and, with a mask head, ``masks``
        (K, H, W) bool (probability >= ``mask_thr_binary``) of
        ``img_shape``. K may be 0.

    Examples:
        >>> # model: a Mask R-CNN built from a config, in eval mode
        >>> feats = model.extract_feat(img)  # img (1, 3, H, W)
        >>> proposals = model.rpn_head.predict(
        ...     feats, data_samples, rescale=False)[0].bboxes
        >>> dets = roi_head_predictions(
        ...     model.roi_head, feats, proposals, img.shape[-2:])
        >>> dets['masks'].shape  # (K, H, W)
    """
    check_roi_head(roi_head)
    cfg = roi_head.test_cfg
    bbox_feats = extract_roi_feats(roi_head.bbox_roi_extractor, feats,
                                   _to_rois(proposals))
    cls_score, bbox_pred = roi_head.bbox_head(bbox_feats)
    boxes = _class_boxes(roi_head.bbox_head, proposals, bbox_pred, img_shape)
    scores = F.softmax(cls_score, dim=-1)[:, :-1]
    keep = multiclass_nms(boxes, scores, cfg.score_thr, cfg.nms,
                          cfg.max_per_img)
    dets = dict(
        boxes=boxes.reshape(-1, 4)[keep],
        scores=scores.reshape(-1)[keep],
        labels=keep % scores.size(1))
    if roi_head.with_mask:
        dets['masks'] = predict_masks(roi_head, feats, dets['boxes'],
                                      dets['labels'], img_shape, pad_shape)
    return dets


def check_roi_head(roi_head):
    """Raise a ValueError unless :func:`roi_head_predictions` reproduces
    the head.

    Args:
        roi_head (StandardRoIHead): A head with a bbox head of
            :data:`BBOX_HEADS` (softmax scores, ``DeltaXYWHBBoxCoder``,
            checked when decoding), RoIAlign extractors, no shared head
            and, optionally, a mask head of :data:`MASK_HEADS` with a
            binary mask threshold.

    Examples:
        >>> check_roi_head(model.roi_head)  # the demo Mask R-CNN: passes
    """
    problems = []
    if roi_head.with_shared_head:
        problems.append('a shared head')
    bbox_head = roi_head.bbox_head
    if type(bbox_head).__name__ not in BBOX_HEADS:
        problems.append(type(bbox_head).__name__)
    elif bbox_head.custom_cls_channels:
        problems.append('a custom classification activation')
    extractors = [roi_head.bbox_roi_extractor]
    if roi_head.with_mask:
        extractors.append(roi_head.mask_roi_extractor)
        if type(roi_head.mask_head).__name__ not in MASK_HEADS:
            problems.append(type(roi_head.mask_head).__name__)
        if roi_head.test_cfg.mask_thr_binary < 0:
            problems.append('masks as probabilities (mask_thr_binary < 0)')
    for extractor in extractors:
        layer = extractor.roi_layers[0]  # all levels alike
        if (type(extractor).__name__ != 'SingleRoIExtractor'
                or type(layer).__name__ != 'RoIAlign'
                or layer.pool_mode != 'avg'):
            problems.append(f'a {type(extractor).__name__} of {layer!r}')
    if problems:
        raise ValueError('Cannot export a StandardRoIHead with ' +
                         ', '.join(problems))


def _to_rois(boxes):
    """mmdet's RoIs of one image: (N, 5), batch index 0 then the box."""
    return torch.cat([boxes.new_zeros(boxes.size(0), 1), boxes], dim=1)


def extract_roi_feats(extractor, feats, rois):
    """What a ``SingleRoIExtractor`` with mmcv ``RoIAlign`` layers computes.

    Args:
        extractor (SingleRoIExtractor): Gives the levels' RoIAlign settings
            and the mapping of RoIs to levels.
        feats (tuple[Tensor]): Maps of one image, each (1, C, h, w).
        rois (Tensor): (N, 5), batch index then x1 y1 x2 y2.

    Returns:
        Tensor: (N, C, out_h, out_w).

    Examples:
        >>> roi_feats = extract_roi_feats(
        ...     roi_head.bbox_roi_extractor, feats, rois)  # (N, C, 7, 7)
    """
    feats = feats[:extractor.num_inputs]
    levels = extractor.map_roi_levels(rois, len(feats))
    pooled = [
        roi_align(feat, rois, layer.output_size, layer.spatial_scale,
                  layer.sampling_ratio, layer.aligned)
        for feat, layer in zip(feats, extractor.roi_layers)
    ]
    roi_feats = pooled[0]
    for level in range(1, len(pooled)):
        roi_feats = torch.where((levels == level)[:, None, None, None],
                                pooled[level], roi_feats)
    return roi_feats


def _class_boxes(bbox_head, proposals, bbox_pred, img_shape):
    """The bbox head's boxes per class, (P, num_classes, 4), clipped to the
    image (one box per proposal for all classes if class-agnostic)."""
    num_rois, num_reg = proposals.size(0), bbox_pred.size(1) // 4
    boxes = decode_boxes(bbox_head.bbox_coder,
                         proposals.repeat_interleave(num_reg, dim=0),
                         bbox_pred.reshape(-1, 4), img_shape)
    return boxes.reshape(num_rois, num_reg, 4).expand(
        num_rois, bbox_head.num_classes, 4)


def multiclass_nms(boxes, scores, score_thr, nms_cfg, max_per_img):
    """Indices of the detections that mmdet's ``multiclass_nms`` keeps.

    Args:
        boxes (Tensor): (P, num_classes, 4) boxes per class.
        scores (Tensor): (P, num_classes), without the background.
        score_thr (float): Candidates score strictly above it.
        nms_cfg (dict): ``iou_threshold`` (and ``type``,
            ``class_agnostic``), as in mmdet's test configs.
        max_per_img (int): At most this many are kept; all when <= 0.

    Returns:
        Tensor: int64 indices into ``scores.reshape(-1)`` (row-major: box
        ``i // num_classes``, class ``i % num_classes``), by descending
        score.

    Examples:
        >>> boxes = torch.tensor([[0., 0, 10, 10], [1, 0, 10, 10]])
        >>> scores = torch.tensor([[.9, .1], [.8, .7]])
        >>> multiclass_nms(boxes[:, None].expand(2, 2, 4), scores, 0.5,
        ...                dict(iou_threshold=0.5), 100).tolist()
        [0, 3]
    """
    candidates = torch.nonzero(scores.reshape(-1) > score_thr)[:, 0]
    keep = nms_by_group(boxes.reshape(-1, 4)[candidates],
                        scores.reshape(-1)[candidates],
                        candidates % scores.size(1), nms_cfg)
    if max_per_img > 0:
        keep = keep[:max_per_img]
    return candidates[keep]


def predict_masks(roi_head, feats, boxes, labels, img_shape,
                  pad_shape=None):
    """Binary masks of the detections, pasted into the image.

    Args:
        roi_head (StandardRoIHead): Gives the mask RoI extractor, the FCN
            mask head and ``test_cfg.mask_thr_binary``.
        feats (tuple[Tensor]): The neck's maps, each (1, C, h, w).
        boxes (Tensor): (K, 4) detected boxes.
        labels (Tensor): (K,) their classes.
        img_shape (tuple[int] | Tensor): (H, W) of the image: ints or,
            with ``pad_shape``, an int64 tensor (2, ).
        pad_shape (tuple[int], optional): (H, W) of the padded input the
            masks are pasted over before they are cut to ``img_shape``.

    Returns:
        Tensor: (K, H, W) bool, of ``img_shape``.

    Examples:
        >>> masks = predict_masks(roi_head, feats, boxes, labels, (H, W))
    """
    mask_feats = extract_roi_feats(roi_head.mask_roi_extractor, feats,
                                   _to_rois(boxes))
    mask_preds = roi_head.mask_head(mask_feats)
    index = labels[:, None, None, None].expand(-1, 1, *mask_preds.shape[2:])
    probs = torch.gather(mask_preds, 1, index).sigmoid()
    if pad_shape is None:
        masks = paste_masks(probs, boxes, img_shape)
    else:
        masks = crop_masks(paste_masks(probs, boxes, pad_shape), img_shape)
    return masks >= roi_head.test_cfg.mask_thr_binary


def crop_masks(masks, img_shape):
    """The top left ``img_shape`` of masks (K, H, W).

    Args:
        masks (Tensor): (K, H, W).
        img_shape (Tensor): (2, ) int64, at most (H, W). Under
            ``torch.export`` its values become unbacked sizes, and the
            cut a ``Slice`` with ends computed in the ONNX graph.

    Examples:
        >>> crop_masks(torch.ones(2, 8, 8), torch.tensor([5, 7])).shape
        torch.Size([2, 5, 7])
    """
    height, width = img_shape.tolist()
    torch._check(height <= masks.size(1))
    torch._check(width <= masks.size(2))
    return masks[:, :height, :width]


def paste_masks(masks, boxes, img_shape):
    """Masks (K, 1, h, w) over their boxes in an image, as mmdet's
    ``_do_paste_mask`` with ``skip_empty=True`` pastes one box at a time.

    Bilinear sampling (``grid_sample``, ``align_corners=False``, zeros
    outside the mask) at the pixel centres, where a degenerate box's
    infinite coordinates read as 0 as in mmdet, and 0 outside the box
    grown by one pixel, where mmdet does not paste.

    Args:
        masks (Tensor): (K, 1, h, w) probabilities.
        boxes (Tensor): (K, 4) x1 y1 x2 y2 in pixels.
        img_shape (tuple[int]): (H, W).

    Returns:
        Tensor: (K, H, W) float.

    Examples:
        >>> paste_masks(torch.ones(1, 1, 28, 28),
        ...             torch.tensor([[2., 2., 6., 6.]]), (8, 8)).shape
        torch.Size([1, 8, 8])
    """
    img_h, img_w = img_shape
    x0, y0, x1, y1 = boxes[:, :, None].unbind(1)  # each (K, 1)
    gx, in_x = _paste_coords(img_w, x0, x1)
    gy, in_y = _paste_coords(img_h, y0, y1)
    num_masks = masks.size(0)
    grid = torch.stack([
        gx[:, None, :].expand(num_masks, img_h, img_w),
        gy[:, :, None].expand(num_masks, img_h, img_w)
    ], dim=3)
    pasted = F.grid_sample(masks, grid, align_corners=False)[:, 0]
    inside = in_y[:, :, None] & in_x[:, None, :]
    return torch.where(inside, pasted, pasted.new_zeros(()))


def _paste_coords(size, lo, hi):
    """Sampling coordinates (K, size) in [-1, 1] over the boxes' extent
    [lo, hi] along one image axis, and which pixels mmdet pastes there."""
    centres = torch.arange(size, device=lo.device).to(lo) + 0.5
    coords = (centres - lo) / (hi - lo) * 2 - 1
    coords = torch.where(torch.isinf(coords), coords.new_zeros(()), coords)
    first = (lo.floor() - 1).clamp(min=0)
    end = (hi.ceil() + 1).clamp(max=size)
    inside = (centres >= first) & (centres < end)
    return coords, inside
