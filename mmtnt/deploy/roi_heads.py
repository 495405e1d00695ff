"""The second stage of Mask R-CNN and Faster R-CNN written for export:
mmdet's ``StandardRoIHead.predict`` for one image in standard ONNX operators.

mmcv's ``RoIAlign`` becomes ``torchvision.ops.roi_align`` with the same
settings, multi-class NMS is one NMS over the (box, class) pairs, and masks
pasted in the graph use interpolation matrices
(:func:`~mmtnt.deploy.masks.paste_masks_separable`).
"""
import torch
import torch.nn.functional as F
from torchvision.ops import roi_align

from .boxes import boxes_to_rois, decode_boxes, nms_by_group
from .masks import paste_masks_separable

#: The bbox heads whose forward gives (class scores, box deltas) from RoI
#: features alone.
BBOX_HEADS = ('BBoxHead', 'ConvFCBBoxHead', 'Shared2FCBBoxHead',
              'Shared4Conv1FCBBoxHead')
#: The mask heads whose forward gives mask logits (K, classes, h, w).
MASK_HEADS = ('FCNMaskHead', )
#: How the masks leave the graph: per RoI (``roi_masks``) or pasted into
#: the image (``masks``).
MASK_OUTPUTS = ('roi', 'image')


def roi_head_predictions(roi_head, feats, proposals, img_shape,
                         mask_output='roi'):
    """Detections of a ``StandardRoIHead`` for one image, as its
    ``predict(..., rescale=False)``.

    Args:
        roi_head (StandardRoIHead): The head (see :func:`check_roi_head`).
        feats (tuple[Tensor]): The neck's maps, each (1, C, h, w).
        proposals (Tensor): RPN boxes (P, 4), x1 y1 x2 y2.
        img_shape (tuple[int] | Tensor): The image's (H, W).
        mask_output (str): ``'roi'`` (default) or ``'image'``.

    Returns:
        dict[str, Tensor]: ``boxes`` (K, 4), ``scores`` (K,), ``labels`` (K,),
        by descending score, and with a mask head ``roi_masks`` (K, M, M) or
        ``masks`` (K, H, W) bool.
    """
    check_roi_head(roi_head)
    check_mask_output(mask_output)
    cfg = roi_head.test_cfg
    bbox_feats = extract_roi_feats(roi_head.bbox_roi_extractor, feats,
                                   boxes_to_rois(proposals))
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
        probs = roi_mask_probs(roi_head, feats, dets['boxes'],
                               dets['labels'])
        if mask_output == 'roi':
            dets['roi_masks'] = probs
        else:
            dets['masks'] = image_masks(roi_head, probs, dets['boxes'],
                                        img_shape)
    return dets


def check_mask_output(mask_output):
    """Raise a ValueError unless ``mask_output`` is in :data:`MASK_OUTPUTS`."""
    if mask_output not in MASK_OUTPUTS:
        raise ValueError(f'mask_output must be one of {MASK_OUTPUTS}, got '
                         f'{mask_output!r}.')


def check_roi_head(roi_head):
    """Raise a ValueError unless :func:`roi_head_predictions` reproduces
    ``roi_head`` (see :data:`BBOX_HEADS`, :data:`MASK_HEADS`)."""
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


def extract_roi_feats(extractor, feats, rois):
    """``SingleRoIExtractor`` over mmcv ``RoIAlign``: each RoI (N, 5) pooled on
    its level, (N, C, out_h, out_w)."""
    feats = feats[:extractor.num_inputs]
    levels = extractor.map_roi_levels(rois, len(feats))
    roi_feats = feats[0].new_zeros(
        rois.size(0), feats[0].size(1),
        *extractor.roi_layers[0].output_size)
    for level, (feat, layer) in enumerate(zip(feats, extractor.roi_layers)):
        index = torch.nonzero(levels == level)[:, 0]
        pooled = roi_align(feat, rois[index], layer.output_size,
                           layer.spatial_scale, layer.sampling_ratio,
                           layer.aligned)
        roi_feats = roi_feats.index_put((index, ), pooled)
    return roi_feats


def _class_boxes(bbox_head, proposals, bbox_pred, img_shape):
    """The bbox head's boxes per class (P, num_classes, 4), clipped."""
    num_rois, num_reg = proposals.size(0), bbox_pred.size(1) // 4
    boxes = decode_boxes(bbox_head.bbox_coder,
                         proposals.repeat_interleave(num_reg, dim=0),
                         bbox_pred.reshape(-1, 4), img_shape)
    return boxes.reshape(num_rois, num_reg, 4).expand(
        num_rois, bbox_head.num_classes, 4)


def multiclass_nms(boxes, scores, score_thr, nms_cfg, max_per_img):
    """Indices into ``scores.reshape(-1)`` (P, num_classes) of the detections
    that mmdet's ``multiclass_nms`` keeps, by descending score.

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


def roi_mask_probs(roi_head, feats, boxes, labels):
    """The mask head's probabilities (K, M, M) of each detection's label over
    its box."""
    mask_feats = extract_roi_feats(roi_head.mask_roi_extractor, feats,
                                   boxes_to_rois(boxes))
    mask_preds = roi_head.mask_head(mask_feats)
    if roi_head.mask_head.class_agnostic:
        labels = torch.zeros_like(labels)
    index = labels[:, None, None, None].expand(-1, 1, *mask_preds.shape[2:])
    return torch.gather(mask_preds, 1, index)[:, 0].sigmoid()


def image_masks(roi_head, probs, boxes, img_shape):
    """Binary masks (K, H, W) of the detections pasted in the graph."""
    if isinstance(img_shape, torch.Tensor):
        img_shape = img_shape.tolist()
    masks = paste_masks_separable(probs, boxes, img_shape)
    return masks >= roi_head.test_cfg.mask_thr_binary
