"""mmtnt.deploy.masks against mmdet's CPU paste of Mask R-CNN masks
(``FCNMaskHead._predict_by_feat_single``): the same pixels, for NumPy and
torch inputs, boxes partly outside the image, tiny and flat ones, and the
masks of ``predict(..., rescale=True)``."""
import numpy as np
import pytest
import torch
from mmengine.config import ConfigDict

from mmtnt.deploy.masks import paste_masks, paste_masks_separable

NUM_CLASSES = 3
MASK_SIZE = 28
IMG_SHAPE = (61, 83)


def random_detections(num, img_shape, seed=0):
    """Mask logits (num, classes, 28, 28), labels and boxes (num, 4): some
    across the image's edges, some smaller than a pixel, some of no width
    or height. The logits spread the probabilities so that many pixels lie
    near the threshold."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(
        num, NUM_CLASSES, MASK_SIZE, MASK_SIZE, generator=generator) * 4
    labels = torch.randint(NUM_CLASSES, (num, ), generator=generator)
    height, width = img_shape
    # centres from 10 pixels outside the image, sizes from 0.1 to 60 px
    centre = torch.rand(num, 2, generator=generator) * torch.tensor(
        [width + 20., height + 20.]) - 10
    size = 0.1 * 600**torch.rand(num, 2, generator=generator)
    size[:num // 8, 0] = 0  # no width
    size[num // 8:num // 4, 1] = 0  # no height
    boxes = torch.cat([centre - size / 2, centre + size / 2], 1)
    # not wholly outside the image, where mmdet's paste fails
    boxes[:, :2] = torch.minimum(boxes[:, :2],
                                 torch.tensor([width - 1., height - 1.]))
    boxes[:, 2:] = boxes[:, 2:].clamp(min=0)
    return logits, labels, boxes


def mmdet_masks(logits, labels, boxes, img_meta, rescale=False,
                threshold=0.5):
    """The masks that mmdet's ``FCNMaskHead`` gives in ``predict``."""
    from mmdet.models.roi_heads.mask_heads import FCNMaskHead
    head = FCNMaskHead(num_convs=0, num_classes=NUM_CLASSES)
    return head._predict_by_feat_single(
        logits, boxes.clone(), labels, img_meta,
        ConfigDict(mask_thr_binary=threshold), rescale=rescale)


def roi_masks(logits, labels):
    """What the graph outputs: each detection's probabilities for its
    label."""
    return logits[torch.arange(len(labels)), labels].sigmoid()


@pytest.mark.parametrize('array', ['numpy', 'torch'])
@pytest.mark.parametrize('threshold', [0.5, 0.3])
def test_paste_masks_is_mmdets_paste(array, threshold):
    logits, labels, boxes = random_detections(64, IMG_SHAPE)
    expected = mmdet_masks(
        logits, labels, boxes,
        dict(ori_shape=IMG_SHAPE, scale_factor=(1., 1.)),
        threshold=threshold)
    probs = roi_masks(logits, labels)
    if array == 'numpy':
        probs, boxes = probs.numpy(), boxes.numpy()
    masks = paste_masks(probs, boxes, IMG_SHAPE, threshold)
    assert isinstance(masks, np.ndarray if array == 'numpy' else torch.Tensor)
    assert masks.dtype in (np.bool_, torch.bool)
    # Not all empty: boxes smaller than a pixel miss the pixel centres.
    assert expected.flatten(1).any(1).float().mean() > 0.25
    np.testing.assert_array_equal(np.asarray(masks), expected.numpy())


def test_paste_masks_at_the_original_size():
    """``predict(..., rescale=True)``: boxes divided by ``scale_factor``,
    masks pasted at ``ori_shape``."""
    ori_shape, scale_factor = (97, 130), (0.6, 0.63)
    img_shape = (round(97 * 0.63), round(130 * 0.6))
    logits, labels, boxes = random_detections(32, img_shape, seed=1)
    boxes = torch.minimum(boxes.clamp(min=0),
                          torch.tensor(img_shape[::-1] * 2, dtype=torch.float))
    expected = mmdet_masks(
        logits, labels, boxes,
        dict(ori_shape=ori_shape, scale_factor=scale_factor), rescale=True)
    scale = np.array(scale_factor * 2, np.float32)
    masks = paste_masks(
        roi_masks(logits, labels).numpy(),
        boxes.numpy() / scale, ori_shape)
    assert masks.shape == (32, *ori_shape)
    np.testing.assert_array_equal(masks, expected.numpy())


def test_paste_masks_edge_cases():
    probs = np.ones((3, MASK_SIZE, MASK_SIZE), np.float32)
    # boxes beyond the right and left edges, (1, 1, 28, 28) masks
    boxes = np.array([[90., 5, 95, 9], [-9, 5, -5, 9], [2, 1, 5, 3]],
                     np.float32)
    masks = paste_masks(probs[:, None], boxes, IMG_SHAPE)
    assert not masks[:2].any() and masks[2, 1:3, 2:5].all()
    assert masks.sum() == 6
    empty = paste_masks(torch.zeros(0, MASK_SIZE, MASK_SIZE),
                        torch.zeros(0, 4), IMG_SHAPE)
    assert empty.shape == (0, *IMG_SHAPE) and empty.dtype == torch.bool


def test_separable_paste_is_the_bilinear_paste():
    """The in-graph paste's probabilities are those of mmdet's sampling
    grid but for float rounding, and zero where mmdet does not paste."""
    from mmdet.models.roi_heads.mask_heads.fcn_mask_head import _do_paste_mask
    logits, labels, boxes = random_detections(64, IMG_SHAPE)
    probs = roi_masks(logits, labels)
    pasted = paste_masks_separable(probs, boxes, IMG_SHAPE)
    expected = torch.zeros(len(probs), *IMG_SHAPE)
    for index in range(len(probs)):
        values, region = _do_paste_mask(probs[index:index + 1, None],
                                        boxes[index:index + 1], *IMG_SHAPE)
        expected[(index, ) + region] = values[0]
    torch.testing.assert_close(pasted, expected, rtol=0, atol=1e-6)
