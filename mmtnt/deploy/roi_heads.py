"""The second stage of Mask R-CNN written for export: mmdet's
``StandardRoIHead.predict`` for one image, made of operators that
``torch.export`` and ``torch.onnx.export(..., dynamo=True)`` translate to
standard ONNX (RoiAlign, NonMaxSuppression, GridSample, NonZero).

What differs from mmdet's code is only how it is computed:

- RoI features: mmcv's ``RoIAlign`` becomes ``torchvision.ops.roi_align``
  with the same output size, scale, sampling ratio and ``aligned`` flag (the
  same numbers; ONNX ``RoiAlign`` with ``coordinate_transformation_mode``
  ``'half_pixel'`` when aligned). Every RoI is pooled on every level and
  its level, chosen by :meth:`SingleRoIExtractor.map_roi_levels`, picked
  with ``torch.where``, instead of indexing RoIs by level.
- Multi-class NMS: one ``torchvision.ops.nms`` over the candidates above
  ``score_thr``, classes kept apart by mmcv's coordinate offset, as
  ``mmcv.ops.batched_nms`` does below its ``split_thr``.
- Masks: each mask is pasted over the whole image with ``grid_sample``,
  then cut to the region mmdet's CPU paste (``skip_empty``) covers, so that
  the binary masks are the same.
"""
import torch
import torch.nn.functional as F
from torchvision.ops import nms, roi_align


def roi_head_predictions(roi_head, feats, proposals, img_shape):
    """Detections of a Mask R-CNN ``StandardRoIHead`` for one image.

    The same as ``roi_head.predict(feats, rpn_results_list, data_samples,
    rescale=False)`` with the head's ``test_cfg``: boxes in the input
    image's coordinates, not scaled back to the original image.

    Args:
        roi_head (StandardRoIHead): The head, with a bbox head that decodes
            ``DeltaXYWHBBoxCoder`` deltas and, optionally, an FCN mask head.
        feats (tuple[Tensor]): The neck's maps, each (1, C, h, w).
        proposals (Tensor): RPN boxes (P, 4), x1 y1 x2 y2 in pixels.
        img_shape (tuple[int]): The input's (H, W); sizes of a tensor
            (``torch.SymInt``) under ``torch.export``.

    Returns:
        dict[str, Tensor]: ``boxes`` (K, 4), ``scores`` (K,), ``labels``
        (K,) int64, by descending score, and, with a mask head, ``masks``
        (K, H, W) bool (probability >= ``mask_thr_binary``). K may be 0.

    Examples:
        >>> # model: a Mask R-CNN built from a config, in eval mode
        >>> feats = model.extract_feat(img)  # img (1, 3, H, W)
        >>> proposals = model.rpn_head.predict(
        ...     feats, data_samples, rescale=False)[0].bboxes
        >>> dets = roi_head_predictions(
        ...     model.roi_head, feats, proposals, img.shape[-2:])
        >>> dets['masks'].shape  # (K, H, W)
    """
    cfg = roi_head.test_cfg
    check_roi_head(roi_head)
    rois = _to_rois(proposals)
    bbox_feats = extract_roi_feats(roi_head.bbox_roi_extractor, feats, rois)
    cls_score, bbox_pred = roi_head.bbox_head(bbox_feats)
    boxes = _decode_boxes(roi_head.bbox_head, proposals, bbox_pred, img_shape)
    scores = F.softmax(cls_score, dim=-1)[:, :-1]
    keep = multiclass_nms(boxes, scores, cfg.score_thr,
                          cfg.nms.iou_threshold, cfg.max_per_img)
    num_classes = scores.size(1)
    dets = dict(
        boxes=boxes.reshape(-1, 4)[keep],
        scores=scores.reshape(-1)[keep],
        labels=keep % num_classes)
    if roi_head.with_mask:
        dets['masks'] = predict_masks(roi_head, feats, dets['boxes'],
                                      dets['labels'], img_shape)
    return dets


def check_roi_head(roi_head):
    """Stop where the head asks for something this export does not do.

    Args:
        roi_head (StandardRoIHead): The head to check.

    Raises:
        NotImplementedError: A shared head, a bbox head with its own score
            activation or with another box coder, NMS other than plain
            ``nms``, or a class-agnostic mask head.
    """
    bbox_head = roi_head.bbox_head
    problems = []
    if roi_head.with_shared_head:
        problems.append('a shared head')
    if bbox_head.custom_cls_channels:
        problems.append('a custom classification activation')
    if type(bbox_head.bbox_coder).__name__ != 'DeltaXYWHBBoxCoder':
        problems.append(type(bbox_head.bbox_coder).__name__)
    if roi_head.test_cfg.nms.get('type', 'nms') != 'nms':
        problems.append(f"NMS {roi_head.test_cfg.nms['type']}")
    if roi_head.with_mask and roi_head.mask_head.class_agnostic:
        problems.append('a class-agnostic mask head')
    if problems:
        raise NotImplementedError(
            'roi_head_predictions does not export ' + ', '.join(problems))


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
    roi_feats = None
    for level, (feat, layer) in enumerate(zip(feats, extractor.roi_layers)):
        pooled = roi_align(feat, rois, layer.output_size, layer.spatial_scale,
                           layer.sampling_ratio, layer.aligned)
        if roi_feats is None:
            roi_feats = pooled
        else:
            roi_feats = torch.where((levels == level)[:, None, None, None],
                                    pooled, roi_feats)
    return roi_feats


def _decode_boxes(bbox_head, proposals, bbox_pred, img_shape):
    """The bbox head's boxes per class, (P, num_classes, 4), clamped to the
    image by the head's coder."""
    num_rois, num_reg = proposals.size(0), bbox_pred.size(1) // 4
    boxes = bbox_head.bbox_coder.decode(
        proposals.repeat_interleave(num_reg, dim=0),
        bbox_pred.reshape(-1, 4),
        max_shape=img_shape)
    return boxes.reshape(num_rois, num_reg, 4).expand(
        num_rois, bbox_head.num_classes, 4)


def multiclass_nms(boxes, scores, score_thr, iou_threshold, max_per_img):
    """Indices of the detections that mmdet's ``multiclass_nms`` keeps.

    Candidates are the (box, class) pairs scoring above ``score_thr``;
    each class is suppressed on its own, by moving the classes' boxes
    apart by ``class * (max coordinate + 1)`` as ``mmcv.ops.batched_nms``
    does.

    Args:
        boxes (Tensor): (P, num_classes, 4) boxes per class.
        scores (Tensor): (P, num_classes), without the background.
        score_thr (float): Candidates score strictly above it.
        iou_threshold (float): Overlap above which a box is suppressed.
        max_per_img (int): At most this many are kept; all when <= 0.

    Returns:
        Tensor: int64 indices into ``scores.reshape(-1)`` (row-major: box
        ``i // num_classes``, class ``i % num_classes``), by descending
        score.

    Examples:
        >>> keep = multiclass_nms(boxes, scores, 0.05, 0.5, 100)
        >>> labels = keep % scores.size(1)
    """
    num_classes = scores.size(1)
    candidates = torch.nonzero(scores.reshape(-1) > score_thr)[:, 0]
    cand_boxes = boxes.reshape(-1, 4)[candidates]
    # the largest coordinate of the candidates (boxes lie inside the image,
    # >= 0, so the appended 0 only matters when there are none)
    max_coordinate = torch.cat([cand_boxes.reshape(-1),
                                cand_boxes.new_zeros(1)]).max()
    offsets = (candidates % num_classes).to(cand_boxes) * (max_coordinate + 1)
    keep = nms(cand_boxes + offsets[:, None], scores.reshape(-1)[candidates],
               iou_threshold)
    if max_per_img > 0:
        keep = keep[:max_per_img]
    return candidates[keep]


def predict_masks(roi_head, feats, boxes, labels, img_shape):
    """Binary masks of the detections, pasted into the image.

    Args:
        roi_head (StandardRoIHead): Gives the mask RoI extractor, the FCN
            mask head and ``test_cfg.mask_thr_binary``.
        feats (tuple[Tensor]): The neck's maps, each (1, C, h, w).
        boxes (Tensor): (K, 4) detected boxes.
        labels (Tensor): (K,) their classes.
        img_shape (tuple[int]): (H, W) of the image.

    Returns:
        Tensor: (K, H, W) bool.

    Examples:
        >>> masks = predict_masks(roi_head, feats, boxes, labels, (H, W))
    """
    mask_feats = extract_roi_feats(roi_head.mask_roi_extractor, feats,
                                   _to_rois(boxes))
    mask_preds = roi_head.mask_head(mask_feats)
    index = labels[:, None, None, None].expand(-1, 1, *mask_preds.shape[2:])
    probs = torch.gather(mask_preds, 1, index).sigmoid()
    masks = paste_masks(probs, boxes, img_shape)
    return masks >= roi_head.test_cfg.mask_thr_binary


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
