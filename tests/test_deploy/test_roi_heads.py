"""mmtnt.deploy.roi_heads against mmdet's ``StandardRoIHead.predict``, in
PyTorch and as an ONNX graph run by ONNX Runtime at sizes the export did
not see.

The demo Mask R-CNN (Twins-SVT, FPN) is built with random weights. Its
untrained box head scores every class near 1/5, so the score threshold is
set inside that range (:data:`SCORE_THR`): some (box, class) pairs pass,
others do not, fewer than ``max_per_img`` are kept, and NMS still has to
separate classes and overlaps. The images are large enough for the random
proposals to reach all three FPN levels.
"""
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import MODELS, DefaultScope
from mmengine.structures import InstanceData

from mmtnt.deploy.roi_heads import extract_roi_feats, roi_head_predictions

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(REPO, 'configs', 'demo',
                  'mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py')
#: Between the random head's smallest and largest class scores (0.17-0.25),
#: passed by about a tenth of the (proposal, class) pairs.
SCORE_THR = 0.22
NUM_PROPOSALS = 100


@pytest.fixture(scope='module')
def model():
    """The demo Mask R-CNN with random weights, in eval mode, built and
    used under mmdet's default scope, which is put back after the module
    (the per-test restore of conftest.py does not reach module fixtures)."""
    import mmtnt.models  # noqa: F401 (registers the backbones)
    cfg = Config.fromfile(CONFIG)
    cfg.model.test_cfg.rcnn.score_thr = SCORE_THR
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmdet'):
        yield MODELS.build(cfg.model).eval()


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


def assert_same_detections(dets, expected, img_shape, box_tol, score_tol):
    """Boxes within ``box_tol`` of the image size, scores within
    ``score_tol``, the same labels, and masks of IoU >= 0.99."""
    boxes, scores, labels, masks = (torch.as_tensor(dets[key]) for key in (
        'boxes', 'scores', 'labels', 'masks'))
    assert labels.dtype == torch.int64
    assert masks.shape == (len(expected), *img_shape)
    torch.testing.assert_close(labels, expected.labels, rtol=0, atol=0)
    torch.testing.assert_close(
        boxes, expected.bboxes, rtol=0, atol=box_tol * max(img_shape))
    torch.testing.assert_close(
        scores, expected.scores, rtol=0, atol=score_tol)
    inter = (masks & expected.masks).flatten(1).sum(1)
    union = (masks | expected.masks).flatten(1).sum(1)
    iou = torch.where(union > 0, inter / union.clamp(min=1), 1.)
    assert iou.min() >= 0.99 if len(iou) else True


@pytest.mark.parametrize('extractor', ['bbox', 'mask'])
def test_roi_feats_match_mmcv(model, extractor):
    extractor = getattr(model.roi_head, f'{extractor}_roi_extractor')
    feats, proposals = image_inputs(model, 320, 320)
    rois = torch.cat([torch.zeros(len(proposals), 1), proposals], 1)
    levels = extractor.map_roi_levels(rois, len(feats))
    assert set(levels.tolist()) == {0, 1, 2}
    with torch.no_grad():
        torch.testing.assert_close(
            extract_roi_feats(extractor, feats, rois),
            extractor(feats, rois),
            rtol=0,
            atol=1e-6)


@pytest.mark.parametrize('img_shape', [(320, 320), (200, 136)])
def test_matches_mmdet(model, img_shape):
    feats, proposals = image_inputs(model, *img_shape)
    expected = mmdet_predictions(model.roi_head, feats, proposals, img_shape)
    assert 0 < len(expected) < model.roi_head.test_cfg.max_per_img
    with torch.no_grad():
        dets = roi_head_predictions(model.roi_head, feats, proposals,
                                    img_shape)
    assert_same_detections(dets, expected, img_shape, 1e-6, 1e-6)


@pytest.mark.parametrize('case', ['no proposals', 'all below score_thr'])
def test_no_detections(model, case, monkeypatch):
    img_shape = (96, 128)
    feats, proposals = image_inputs(model, *img_shape)
    if case == 'no proposals':
        proposals = proposals[:0]
    else:
        monkeypatch.setitem(model.roi_head.test_cfg, 'score_thr', 1.0)
    expected = mmdet_predictions(model.roi_head, feats, proposals, img_shape)
    with torch.no_grad():
        dets = roi_head_predictions(model.roi_head, feats, proposals,
                                    img_shape)
    assert len(expected) == 0
    assert_same_detections(dets, expected, img_shape, 0, 0)


def test_rejects_what_it_does_not_reproduce(model, monkeypatch):
    monkeypatch.setitem(model.roi_head.test_cfg, 'mask_thr_binary', -1)
    feats, proposals = image_inputs(model, 96, 128)
    with pytest.raises(ValueError, match='mask_thr_binary'):
        roi_head_predictions(model.roi_head, feats, proposals, (96, 128))


class RoIHeadGraph(torch.nn.Module):
    """The exported module: an image, only for its size, the neck's three
    maps and the proposals -> the detections."""

    def __init__(self, roi_head):
        super().__init__()
        self.roi_head = roi_head

    def forward(self, image, feat0, feat1, feat2, proposals):
        dets = roi_head_predictions(self.roi_head, (feat0, feat1, feat2),
                                    proposals, image.shape[-2:])
        return dets['boxes'], dets['scores'], dets['labels'], dets['masks']


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
    assert {'RoiAlign', 'NonMaxSuppression', 'GridSample'} <= ops
    return ort.InferenceSession(
        onnx_program.model_proto.SerializeToString(),
        providers=['CPUExecutionProvider'])


def test_onnx_matches_mmdet(model):
    feats, proposals = image_inputs(model, 256, 320)
    session = export_onnx(model.roi_head, feats, proposals, (256, 320))
    names = [node.name for node in session.get_inputs()]
    # Many detections, one and none: torchvision's fake nms, which
    # torch.export traces, assumes that at least two boxes are kept.
    cases = [((352, 288), NUM_PROPOSALS - 20), ((288, 416), NUM_PROPOSALS),
             ((96, 128), 1), ((288, 416), 0)]
    counts = []
    for img_shape, num_proposals in cases:
        feats, proposals = image_inputs(model, *img_shape, num_proposals, 1)
        expected = mmdet_predictions(model.roi_head, feats, proposals,
                                     img_shape)
        counts.append(len(expected))
        inputs = [torch.zeros(1, 1, *img_shape), *feats, proposals]
        outputs = session.run(
            None, {name: x.numpy()
                   for name, x in zip(names, inputs)})
        dets = dict(zip(('boxes', 'scores', 'labels', 'masks'), outputs))
        assert_same_detections(dets, expected, img_shape, 1e-3, 1e-4)
    assert min(counts[:2]) > 1 and counts[2:] == [1, 0]
