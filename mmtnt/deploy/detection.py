"""mmdet detectors as graphs that end in their detections, for ONNX.

:class:`DetectorGraph` returns what mmdet's ``predict(..., rescale=False)``
returns for one image, its post-processing written with ops that
``torch.export`` traces at symbolic sizes (boxes in
:mod:`mmtnt.deploy.boxes`, Mask R-CNN's second stage in
:mod:`mmtnt.deploy.roi_heads`).
"""
import torch
import torch.nn as nn

from .boxes import (check_box_coder, check_nms, decode_boxes, image_size,
                    keep_large, nms_by_group)
from .roi_heads import check_mask_output, check_roi_head, roi_head_predictions

#: The dense heads whose outputs :func:`dense_head_detections` decodes.
DENSE_HEADS = ('RetinaHead', )
#: The exported graph's ``img_shape`` when it is not fed: larger than any
#: input, so that :class:`DetectorGraph` takes the input's size.
UNPADDED = (2**62, 2**62)


def level_scores(head, cls_score):
    """One level's class scores (num_priors, num_classes) from an anchor head's
    output (A * C, H, W), without a softmax's background."""
    logits = cls_score.permute(1, 2, 0).reshape(-1, head.cls_out_channels)
    if head.use_sigmoid_cls:
        return logits.sigmoid()
    return logits.softmax(-1)[:, :-1]


def top_candidates(scores, count):
    """The ``count`` highest of the flattened ``scores`` and their indices;
    all of them for a ``count`` of -1 or 0."""
    scores = scores.reshape(-1)
    if count <= 0:
        return scores.sort(descending=True)
    # A minimum, not a branch on the size: under torch.export the size is
    # symbolic, and a branch would keep the example's way for all sizes.
    return scores.topk(torch.sym_min(count, scores.shape[0]))


def head_candidates(head, cls_scores, bbox_preds, nms_pre):
    """The ``nms_pre`` best (prior, class) scores of each level of a dense
    head: scores, classes, levels, priors (M, 4) and deltas (M, 4)."""
    mlvl_priors = head.prior_generator.grid_priors(
        [score.shape[-2:] for score in cls_scores],
        device=cls_scores[0].device)
    found = [], [], [], [], []
    for level, (cls_score, bbox_pred, priors) in enumerate(
            zip(cls_scores, bbox_preds, mlvl_priors)):
        scores = level_scores(head, cls_score[0])
        top, index = top_candidates(scores, nms_pre)
        num_classes = scores.shape[1]
        prior = torch.div(index, num_classes, rounding_mode='floor')
        deltas = bbox_pred[0].permute(1, 2, 0).reshape(-1, 4)
        values = (top, index % num_classes, torch.full_like(index, level),
                  priors[prior], deltas[prior])
        for values_so_far, value in zip(found, values):
            values_so_far.append(value)
    return tuple(torch.cat(values) for values in found)


def head_detections(head, cls_scores, bbox_preds, img_shape, cfg, rpn):
    """Boxes, scores and classes of :func:`dense_head_detections`, or with
    ``rpn`` those of :func:`rpn_proposals` with their levels."""
    scores, labels, levels, priors, deltas = head_candidates(
        head, cls_scores, bbox_preds, cfg.get('nms_pre', -1))
    if rpn:
        labels = levels
    else:
        above = scores > cfg.get('score_thr', 0)
        scores, labels, priors, deltas = (
            value[above] for value in (scores, labels, priors, deltas))
    boxes = decode_boxes(head.bbox_coder, priors, deltas, img_shape)
    boxes, scores, labels = keep_large(boxes, cfg.get('min_bbox_size', -1),
                                       scores, labels)
    keep = nms_by_group(boxes, scores, labels, cfg.nms)[:cfg.max_per_img]
    return boxes[keep], scores[keep], labels[keep]


def dense_head_detections(head, cls_scores, bbox_preds, img_shape, cfg=None):
    """A dense head's detections in one image, as mmdet's
    ``BaseDenseHead.predict_by_feat`` (``rescale=False``, with NMS).

    Args:
        head (nn.Module): An mmdet anchor head (RetinaHead).
        cls_scores (list[Tensor]): Class logits per level, (1, A * C, H, W).
        bbox_preds (list[Tensor]): Box deltas per level, (1, A * 4, H, W).
        img_shape (tuple | Tensor): Height and width the boxes are clipped to.
        cfg (dict, optional): The test config. Defaults to the head's.

    Returns:
        tuple[Tensor, Tensor, Tensor]: Boxes (K, 4) xyxy, scores (K, ) by
        decreasing score and labels (K, ) int64.
    """
    cfg = head.test_cfg if cfg is None else cfg
    return head_detections(head, cls_scores, bbox_preds, img_shape, cfg,
                           rpn=False)


def rpn_proposals(head, cls_scores, bbox_preds, img_shape, cfg):
    """An RPN head's proposals in one image, as mmdet's
    ``RPNHead._predict_by_feat_single`` (``rescale=False``).

    Args:
        head (nn.Module): An mmdet ``RPNHead``.
        cls_scores, bbox_preds, img_shape: As for
            :func:`dense_head_detections`.
        cfg (dict): The RPN's test config (``test_cfg.rpn``).

    Returns:
        tuple[Tensor, Tensor]: Proposals (K, 4) xyxy and their scores (K, ).
    """
    boxes, scores, _ = head_detections(head, cls_scores, bbox_preds,
                                       img_shape, cfg, rpn=True)
    return boxes, scores


class DetectorGraph(nn.Module):
    """What is exported of an mmdet detector: one preprocessed image -> its
    detections.

    The optional second input is mmdet's ``img_shape`` of a padded image (by
    default :data:`UNPADDED`, the input's size); boxes are clipped to it. Mask
    R-CNN's masks leave the graph per RoI (``roi_masks``, pasted by
    :func:`mmtnt.deploy.masks.paste_masks`) or, with ``mask_output='image'``,
    as image ``masks`` (K, h, w) bool.

    Args:
        detector (nn.Module): An mmdet ``RetinaNet`` or ``MaskRCNN``.
        mask_output (str): ``'roi'`` (default) or ``'image'``.

    Attributes:
        output_names (tuple[str]): ``boxes``, ``scores``, ``labels`` and, for
            Mask R-CNN, ``roi_masks`` or ``masks``.
        mask_threshold (float | None): ``mask_thr_binary``; None without masks.

    Examples:
        >>> from mmengine.config import Config
        >>> from mmengine.registry import MODELS, init_default_scope
        >>> init_default_scope('mmdet')
        >>> cfg = Config.fromfile(
        ...     'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py')
        >>> graph = DetectorGraph(MODELS.build(cfg.model).eval())
        >>> boxes, scores, labels = graph(torch.rand(1, 3, 96, 128),
        ...                               torch.tensor([90, 100]))
        >>> boxes.shape[1], scores.dtype, labels.dtype
        (4, torch.float32, torch.int64)
    """

    def __init__(self, detector, mask_output='roi'):
        super().__init__()
        check_detector(detector)
        check_mask_output(mask_output)
        self.detector = detector
        self.mask_output = mask_output
        self.two_stage = hasattr(detector, 'roi_head')
        self.output_names = ('boxes', 'scores', 'labels')
        self.mask_threshold = None
        if self.two_stage and detector.roi_head.with_mask:
            self.output_names += (
                'roi_masks' if mask_output == 'roi' else 'masks', )
            self.mask_threshold = detector.roi_head.test_cfg.mask_thr_binary

    def forward(self, inputs, img_shape=None):
        """The outputs of :attr:`output_names` for ``inputs`` (1, C, H, W)
        padded from ``img_shape`` (2, ) int64, by default (H, W)."""
        img_shape = image_size(inputs.shape[2:], img_shape)
        feats = self.detector.extract_feat(inputs)
        if not self.two_stage:
            head = self.detector.bbox_head
            return dense_head_detections(head, *head(feats), img_shape)
        rpn_head = self.detector.rpn_head
        proposals, _ = rpn_proposals(rpn_head, *rpn_head(feats), img_shape,
                                     rpn_head.test_cfg)
        results = roi_head_predictions(self.detector.roi_head, feats,
                                       proposals, img_shape, self.mask_output)
        return tuple(results[name] for name in self.output_names)


def check_detector(detector):
    """Raise a ValueError unless :class:`DetectorGraph` can export
    ``detector``."""
    head = getattr(detector, 'bbox_head', None)
    rpn_head = getattr(detector, 'rpn_head', None)
    roi_head = getattr(detector, 'roi_head', None)
    if type(head).__name__ in DENSE_HEADS:
        heads = [head]
    elif (type(rpn_head).__name__ == 'RPNHead'
          and type(roi_head).__name__ == 'StandardRoIHead'):
        check_roi_head(roi_head)
        heads = [rpn_head, roi_head]
    else:
        parts = [
            type(part).__name__ for part in (head, rpn_head, roi_head)
            if part is not None
        ]
        raise ValueError(
            f'Cannot export a {type(detector).__name__} '
            f'({", ".join(parts) or "no heads"}): RetinaNet-like '
            'single-stage detectors (RetinaHead) and Mask R-CNN / Faster '
            'R-CNN (RPNHead + StandardRoIHead) are exported.')
    for part in heads:
        coder_owner = getattr(part, 'bbox_head', part)
        check_box_coder(coder_owner.bbox_coder)
        check_nms(part.test_cfg.nms)
