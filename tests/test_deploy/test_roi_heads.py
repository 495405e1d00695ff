"""mmtnt.deploy.roi_heads against mmdet's ``StandardRoIHead.predict``, in
PyTorch and as an ONNX graph run by ONNX Runtime at sizes the export did
not see.

The demo Mask R-CNN with random weights (``mask_rcnn``, conftest.py) gets
random proposals in images large enough for them to reach all three FPN
levels. Its per-RoI masks, pasted by :func:`mmtnt.deploy.masks.paste_masks`,
are mmdet's masks.
"""
import functools

import pytest
import torch
from mmengine.structures import InstanceData

from mmtnt.deploy.masks import paste_masks
from mmtnt.deploy.roi_heads import extract_roi_feats, roi_head_predictions

NUM_PROPOSALS = 100


def image_inputs(model, height, width, num_proposals=NUM_PROPOSALS, seed=0):
    """The neck's maps of a random image and random proposals in it: sizes
    (square root of the area) from 8 pixels to the image's longer side,
    aspect ratios 1:2 to 2:1, clipped to the image."""
    generator = torch.Generator().manual_seed(seed)
    image_size = torch.tensor([width, height], dtype=torch.float32)
    centre = torch.rand(num_proposals, 2, generator=generator) * image_size
    scale, ratio = torch.rand(2, num_proposals, 1, generator=generator)
    scale = 8 * (image_size.max() / 8)**scale
    ratio = 2**(2 * ratio - 1)
    half = torch.cat([scale * ratio.sqrt(), scale / ratio.sqrt()], 1) / 2
    proposals = torch.cat([centre - half, centre + half], 1)
    proposals = torch.minimum(proposals.clamp(min=0), image_size.repeat(2))
    image = torch.randn(1, 3, height, width, generator=generator)
    with torch.no_grad():
        feats = model.extract_feat(image)
    return feats, proposals


def mmdet_predictions(roi_head, feats, proposals, img_shape):
    """``roi_head.predict`` of one image at its input size."""
    from mmdet.structures import DetDataSample
    sample = DetDataSample(
        metainfo=dict(
            img_shape=img_shape, ori_shape=img_shape,
            scale_factor=(1., 1.)))
    with torch.no_grad():
        return roi_head.predict(
            feats, [InstanceData(bboxes=proposals)], [sample],
            rescale=False)[0]


def image_masks(dets, img_shape, threshold=0.5):
    """The binary image masks of ``dets``: its ``masks``, or its
    ``roi_masks`` pasted."""
    if 'masks' in dets:
        return torch.as_tensor(dets['masks'])
    return torch.as_tensor(
        paste_masks(dets['roi_masks'], dets['boxes'], img_shape, threshold))


def assert_same_detections(dets, expected, img_shape, box_tol, score_tol,
                           min_mask_iou=0.99):
    """Boxes within ``box_tol`` of the image size, scores within
    ``score_tol``, the same labels, and masks (per RoI ones pasted) of IoU
    >= ``min_mask_iou``, the same pixels when it is 1."""
    boxes, scores, labels = (torch.as_tensor(dets[key])
                             for key in ('boxes', 'scores', 'labels'))
    masks = image_masks(dets, img_shape)
    assert labels.dtype == torch.int64
    assert masks.shape == (len(expected), *img_shape)
    torch.testing.assert_close(labels, expected.labels, rtol=0, atol=0)
    torch.testing.assert_close(
        boxes, expected.bboxes, rtol=0, atol=box_tol * max(img_shape))
    torch.testing.assert_close(
        scores, expected.scores, rtol=0, atol=score_tol)
    if min_mask_iou == 1:
        assert torch.equal(masks, expected.masks)
    inter = (masks & expected.masks).flatten(1).sum(1)
    union = (masks | expected.masks).flatten(1).sum(1)
    iou = torch.where(union > 0, inter / union.clamp(min=1), 1.)
    assert iou.min() >= min_mask_iou if len(iou) else True


@pytest.fixture(scope='module')
def scene(mask_rcnn):
    """The maps of a 320x320 image and 100 proposals on all levels."""
    return image_inputs(mask_rcnn, 320, 320)


@pytest.mark.parametrize('extractor', ['bbox', 'mask'])
@pytest.mark.parametrize('rois', ['all levels', 'first level', 'none'])
def test_roi_feats_match_mmcv(mask_rcnn, scene, extractor, rois):
    extractor = getattr(mask_rcnn.roi_head, f'{extractor}_roi_extractor')
    feats, proposals = scene
    boxes = torch.cat([torch.zeros(len(proposals), 1), proposals], 1)
    levels = extractor.map_roi_levels(boxes, len(feats))
    selected = dict(
        zip(['all levels', 'first level', 'none'],
            [boxes, boxes[levels == 0], boxes[:0]]))[rois]
    expected_levels = {'all levels': {0, 1, 2}, 'first level': {0},
                       'none': set()}[rois]
    assert set(extractor.map_roi_levels(selected, 3).tolist()) == (
        expected_levels)
    with torch.no_grad():
        roi_feats = extract_roi_feats(extractor, feats, selected)
        torch.testing.assert_close(
            roi_feats, extractor(feats, selected), rtol=0, atol=1e-6)
    assert roi_feats.shape == (len(selected), 64,
                               *extractor.roi_layers[0].output_size)


@pytest.fixture(scope='module')
def inputs_and_expected(mask_rcnn):
    """A function of ``img_shape``: :func:`image_inputs` of that size and
    mmdet's predictions, computed once for both mask outputs."""

    @functools.cache
    def inputs_and_expected(img_shape):
        feats, proposals = image_inputs(mask_rcnn, *img_shape)
        return feats, proposals, mmdet_predictions(
            mask_rcnn.roi_head, feats, proposals, img_shape)

    return inputs_and_expected


@pytest.mark.parametrize('mask_output', ['roi', 'image'])
@pytest.mark.parametrize('img_shape', [(320, 320), (200, 136)])
def test_matches_mmdet(mask_rcnn, inputs_and_expected, img_shape,
                       mask_output):
    feats, proposals, expected = inputs_and_expected(img_shape)
    roi_head = mask_rcnn.roi_head
    assert 0 < len(expected) < roi_head.test_cfg.max_per_img
    with torch.no_grad():
        dets = roi_head_predictions(roi_head, feats, proposals, img_shape,
                                    mask_output)
    if mask_output == 'roi':
        assert dets['roi_masks'].shape == (len(expected), 28, 28)
        assert 'masks' not in dets
    # Pasted after the graph, the masks are mmdet's; in it, but for float
    # rounding.
    assert_same_detections(dets, expected, img_shape, 1e-6, 1e-6,
                           1 if mask_output == 'roi' else 0.99)


@pytest.mark.parametrize('mask_output', ['roi', 'image'])
@pytest.mark.parametrize('case', ['no proposals', 'all below score_thr'])
def test_no_detections(mask_rcnn, case, mask_output, monkeypatch):
    img_shape = (96, 128)
    feats, proposals = image_inputs(mask_rcnn, *img_shape)
    if case == 'no proposals':
        proposals = proposals[:0]
    else:
        monkeypatch.setitem(mask_rcnn.roi_head.test_cfg, 'score_thr', 1.0)
    expected = mmdet_predictions(mask_rcnn.roi_head, feats, proposals,
                                 img_shape)
    with torch.no_grad():
        dets = roi_head_predictions(mask_rcnn.roi_head, feats, proposals,
                                    img_shape, mask_output)
    assert len(expected) == 0
    assert_same_detections(dets, expected, img_shape, 0, 0)


def test_rejects_what_it_does_not_reproduce(mask_rcnn, monkeypatch):
    feats, proposals = image_inputs(mask_rcnn, 96, 128)
    with pytest.raises(ValueError, match="'roi', 'image'"):
        roi_head_predictions(mask_rcnn.roi_head, feats, proposals,
                             (96, 128), 'probabilities')
    monkeypatch.setitem(mask_rcnn.roi_head.test_cfg, 'mask_thr_binary', -1)
    with pytest.raises(ValueError, match='mask_thr_binary'):
        roi_head_predictions(mask_rcnn.roi_head, feats, proposals,
                             (96, 128))


class RoIHeadGraph(torch.nn.Module):
    """The exported module: an image, only for its size, the neck's three
    maps and the proposals -> the detections, masks per RoI."""

    def __init__(self, roi_head):
        super().__init__()
        self.roi_head = roi_head

    def forward(self, image, feat0, feat1, feat2, proposals):
        dets = roi_head_predictions(self.roi_head, (feat0, feat1, feat2),
                                    proposals, image.shape[-2:])
        return (dets['boxes'], dets['scores'], dets['labels'],
                dets['roi_masks'])


def export_onnx(roi_head, feats, proposals, img_shape):
    """An ONNX Runtime session of :class:`RoIHeadGraph`, exported with
    symbolic image, map and proposal sizes."""
    import onnxruntime as ort
    from torch.export import Dim
    image = torch.zeros(1, 1, *img_shape)
    dynamic_shapes = (
        {2: Dim('height', min=16), 3: Dim('width', min=16)},
        *({2: Dim(f'map_height{i}'), 3: Dim(f'map_width{i}')}
          for i in range(len(feats))),
        {0: Dim('num_proposals', min=0)},
    )
    with torch.no_grad():
        program = torch.export.export(
            RoIHeadGraph(roi_head), (image, *feats, proposals),
            dynamic_shapes=dynamic_shapes, strict=False)
    onnx_program = torch.onnx.export(program, dynamo=True, verbose=False)
    ops = {node.op_type for node in onnx_program.model_proto.graph.node}
    # Each level pools its own RoIs (NonZero) and puts them in place.
    assert {'RoiAlign', 'NonMaxSuppression', 'NonZero', 'ScatterND'} <= ops
    assert 'GridSample' not in ops
    return ort.InferenceSession(
        onnx_program.model_proto.SerializeToString(),
        providers=['CPUExecutionProvider'])


def test_onnx_matches_mmdet(mask_rcnn):
    roi_head = mask_rcnn.roi_head
    feats, proposals = image_inputs(mask_rcnn, 256, 320)
    session = export_onnx(roi_head, feats, proposals, (256, 320))
    names = [node.name for node in session.get_inputs()]
    # Many detections, one and none: torchvision's fake nms, which
    # torch.export traces, assumes that at least two boxes are kept.
    cases = [((352, 288), NUM_PROPOSALS - 20), ((288, 416), NUM_PROPOSALS),
             ((96, 128), 1), ((288, 416), 0)]
    counts = []
    for img_shape, num_proposals in cases:
        feats, proposals = image_inputs(mask_rcnn, *img_shape, num_proposals,
                                        1)
        expected = mmdet_predictions(roi_head, feats, proposals, img_shape)
        counts.append(len(expected))
        inputs = [torch.zeros(1, 1, *img_shape), *feats, proposals]
        outputs = session.run(
            None, {name: x.numpy()
                   for name, x in zip(names, inputs)})
        dets = dict(zip(('boxes', 'scores', 'labels', 'roi_masks'),
                        outputs))
        assert dets['roi_masks'].shape == (len(expected), 28, 28)
        assert_same_detections(dets, expected, img_shape, 1e-3, 1e-4)
    assert min(counts[:2]) > 1 and counts[2:] == [1, 0]
