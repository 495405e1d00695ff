"""mmtnt.deploy.DetectorGraph of Mask R-CNN against mmdet's
``predict(..., rescale=False)``, in PyTorch: the per-RoI masks pasted by
:func:`mmtnt.deploy.masks.paste_masks` are mmdet's masks, pixel for pixel,
and so are those the graph pastes itself (``mask_output='image'``), but
for float rounding; in a padded input too, with its ``img_shape``."""
import functools

import pytest
import torch

from mmtnt.deploy.detection import DetectorGraph
from mmtnt.deploy.masks import paste_masks


def mmdet_detections(model, inputs, img_shape):
    """mmdet's ``predict`` of ``inputs`` (1, 3, H, W), an image of
    ``img_shape`` maybe padded."""
    from mmdet.structures import DetDataSample
    pad_shape = tuple(inputs.shape[2:])
    sample = DetDataSample(
        metainfo=dict(
            img_shape=img_shape,
            ori_shape=img_shape,
            pad_shape=pad_shape,
            batch_input_shape=pad_shape,
            scale_factor=(1., 1.)))
    with torch.no_grad():
        return model.predict(inputs, [sample], rescale=False)[0].pred_instances


@pytest.fixture(scope='module')
def image_and_expected(mask_rcnn):
    """A function of ``(img_shape, pad_shape)``: a random image of
    ``img_shape`` padded with zeros to ``pad_shape``, and mmdet's
    detections, computed once for both mask outputs."""

    @functools.cache
    def image_and_expected(img_shape, pad_shape):
        inputs = torch.zeros(1, 3, *pad_shape)
        inputs[..., :img_shape[0], :img_shape[1]] = torch.randn(
            1, 3, *img_shape, generator=torch.Generator().manual_seed(0))
        return inputs, mmdet_detections(mask_rcnn, inputs, img_shape)

    return image_and_expected


@pytest.mark.parametrize('mask_output', ['roi', 'image'])
@pytest.mark.parametrize('img_shape,pad_shape', [((160, 224), (160, 224)),
                                                 ((137, 201), (160, 224))])
def test_mask_rcnn_matches_mmdet(mask_rcnn, image_and_expected, mask_output,
                                 img_shape, pad_shape):
    inputs, expected = image_and_expected(img_shape, pad_shape)
    assert len(expected) > 10
    graph = DetectorGraph(mask_rcnn, mask_output=mask_output)
    with torch.no_grad():
        outputs = graph(inputs, torch.tensor(img_shape)
                        if img_shape != pad_shape else None)
    found = dict(zip(graph.output_names, outputs))
    for key, name in [('boxes', 'bboxes'), ('scores', 'scores'),
                      ('labels', 'labels')]:
        torch.testing.assert_close(found[key], expected[name], rtol=0,
                                   atol=1e-5 if key == 'boxes' else 1e-6)
    if mask_output == 'roi':
        assert graph.output_names[3] == 'roi_masks'
        assert found['roi_masks'].shape == (len(expected), 28, 28)
        masks = paste_masks(found['roi_masks'], found['boxes'], img_shape,
                            graph.mask_threshold)
        assert torch.equal(masks, expected.masks)
    else:
        masks = found['masks']
        assert masks.shape == expected.masks.shape
        # at most a pixel in ten thousand on the threshold's edge
        assert (masks != expected.masks).float().mean() < 1e-4


def test_rejects_unknown_mask_output(mask_rcnn):
    with pytest.raises(ValueError, match='mask_output'):
        DetectorGraph(mask_rcnn, mask_output='probabilities')
