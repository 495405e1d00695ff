"""Verify an exported detector: its detections in ONNX Runtime or OpenVINO
matched (:func:`match_detections`) with those of mmdet's eager ``predict``
(:func:`verify_detector_onnx`)."""
import os.path as osp

import numpy as np
import torch

from .graphs import channels_reversed, input_channels
from .masks import paste_masks
from .runtime import IMG_SHAPE_NAME, INPUT_NAME, cpu_session

#: The largest box coordinate difference, as a fraction of the input's
#: longer side.
DET_BOX_TOLERANCE = 1e-3
#: The largest score difference (scores this close may also swap places).
DET_SCORE_TOLERANCE = 1e-4
#: The smallest IoU of matched masks.
DET_MASK_IOU = 0.99


def verdict(check):
    """A check's line ends in ``': OK'``, or ``': FAILED'`` and the error."""
    if check['ok']:
        return ': OK'
    return ': FAILED' + ('' if check['error'] is None else
                         f', {check["error"]}')


def read_image(path):
    """The image file ``path`` as mmcv loads it (BGR), or a ValueError."""
    import mmcv
    image = mmcv.imread(path) if osp.isfile(path) else None
    if image is None:
        raise ValueError(f'Cannot read the image {path}.')
    return image


def pad_input(inputs, pad_shape):
    """Pad an input (1, C, h, w) with zeros at the bottom and right to
    ``pad_shape``, as mmengine's ``stack_batch`` does.

    Examples:
        >>> pad_input(torch.ones(1, 3, 5, 6), (8, 8)).shape
        torch.Size([1, 3, 8, 8])
    """
    height, width = inputs.shape[2:]
    return torch.nn.functional.pad(
        inputs, (0, pad_shape[1] - width, 0, pad_shape[0] - height))


def detector_input(model, shape, image=None, seed=0):
    """A preprocessed input (1, C, H, W) for a detector: ``image`` (BGR, random
    pixels without it) resized to ``shape`` and normalised, not padded."""
    import mmcv
    height, width = shape
    if image is None:
        rng = np.random.default_rng(seed)
        image = rng.integers(0, 256, (height, width, input_channels(model)))
    else:
        image = mmcv.imresize(image, (width, height))
    inputs = torch.from_numpy(np.ascontiguousarray(image)).float()
    inputs = inputs.permute(2, 0, 1)[None]
    preprocessor = model.data_preprocessor
    if channels_reversed(preprocessor):
        inputs = inputs.flip(1)
    if getattr(preprocessor, 'mean', None) is not None:
        inputs = (inputs - preprocessor.mean) / preprocessor.std
    return inputs


def eager_detections(model, inputs, img_shape=None):
    """mmdet's ``predict(inputs, rescale=False)`` of one image, of
    ``img_shape`` within ``inputs``: ``boxes``, ``scores``, ``labels``
    (``masks``), numpy."""
    from ..analysis.flops import data_samples
    size = tuple(inputs.shape[2:])
    samples = data_samples('mmdet', tuple(img_shape or size), size)
    with torch.no_grad():
        found = model.predict(inputs, samples, rescale=False)[0]
    found = found.pred_instances
    results = dict(
        boxes=found.bboxes.numpy(),
        scores=found.scores.numpy(),
        labels=found.labels.numpy())
    if 'masks' in found:
        results['masks'] = found.masks.numpy()
    return results


def tie_groups(scores, tolerance):
    """Runs of detections, by decreasing score, whose neighbours' scores differ
    by at most ``tolerance``.

    Examples:
        >>> tie_groups(np.array([.9, .5, .49995, .4999, .1]), 1e-4)
        [(0, 1), (1, 4), (4, 5)]
    """
    groups, start = [], 0
    for i in range(1, len(scores) + 1):
        if i == len(scores) or scores[i - 1] - scores[i] > tolerance:
            groups.append((start, i))
            start = i
    return groups


def mask_iou(mask, other):
    """IoU of two masks (probabilities at 0.5); 1 for two empty ones."""
    mask, other = np.asarray(mask) >= 0.5, np.asarray(other) >= 0.5
    union = np.logical_or(mask, other).sum()
    return float(np.logical_and(mask, other).sum() / union) if union else 1.


def pair_differences(actual, expected, i, j):
    """Box and score differences and mask IoU of detections ``i`` and ``j``;
    None if their labels differ."""
    if actual['labels'][i] != expected['labels'][j]:
        return None
    box = float(np.abs(actual['boxes'][i] - expected['boxes'][j]).max())
    score = float(abs(actual['scores'][i] - expected['scores'][j]))
    iou = (mask_iou(actual['masks'][i], expected['masks'][j])
           if 'masks' in expected else 1.)
    return box, score, iou


def match_detections(actual, expected, max_side,
                     box_tolerance=DET_BOX_TOLERANCE,
                     score_tolerance=DET_SCORE_TOLERANCE,
                     min_mask_iou=DET_MASK_IOU):
    """Match an exported detector's detections with mmdet's, in order, and as a
    set within a run of near-equal scores (:func:`tie_groups`).

    Args:
        actual (dict): ``boxes``, ``scores``, ``labels`` (``masks``), numpy.
        expected (dict): The same, from mmdet.
        max_side (int): The input's longer side.
        box_tolerance (float): Largest box difference, a fraction of
            ``max_side``.
        score_tolerance (float): Largest score difference.
        min_mask_iou (float): Smallest IoU of matched masks.

    Returns:
        dict: ``count``, ``expected_count``, ``max_box`` (pixels),
        ``max_score``, ``min_mask_iou`` (None without masks), ``reordered`` and
        ``error`` (None when all matched).

    Examples:
        >>> det = dict(boxes=np.array([[0., 0, 9, 9], [1, 1, 5, 5]]),
        ...            scores=np.array([.5, .5]), labels=np.array([1, 2]))
        >>> swapped = {k: v[::-1] for k, v in det.items()}
        >>> result = match_detections(swapped, det, 10)
        >>> result['reordered'], result['error']
        (2, None)
    """
    result = dict(
        count=len(actual['scores']),
        expected_count=len(expected['scores']),
        max_box=0.,
        max_score=0.,
        min_mask_iou=1. if 'masks' in expected else None,
        reordered=0,
        error=None)
    if result['count'] != result['expected_count']:
        result['error'] = (f'{result["count"]} detections, mmdet '
                           f'{result["expected_count"]}')
        return result
    limits = (box_tolerance * max_side, score_tolerance, min_mask_iou)

    def close(diffs):
        return diffs is not None and (diffs[0] <= limits[0]
                                      and diffs[1] <= limits[1]
                                      and diffs[2] >= limits[2])

    pairs = []
    for start, end in tie_groups(expected['scores'], score_tolerance):
        group = [(j, pair_differences(actual, expected, j, j))
                 for j in range(start, end)]
        if not all(close(diffs) for _, diffs in group):
            unmatched = list(range(start, end))
            group = []
            for j in range(start, end):
                found = [(i, pair_differences(actual, expected, i, j))
                         for i in unmatched]
                found = [(i, d) for i, d in found if close(d)]
                if not found:
                    result['error'] = (
                        f'mmdet\'s detection {j} (label '
                        f'{expected["labels"][j]}, score '
                        f'{expected["scores"][j]:.6f}) has no counterpart')
                    found = [(j, pair_differences(actual, expected, j, j))]
                i, diffs = found[0]
                if i in unmatched:
                    unmatched.remove(i)
                result['reordered'] += i != j
                group.append((j, diffs))
        pairs += [diffs for _, diffs in group if diffs is not None]
    if pairs:
        box, score, iou = np.array(pairs).T
        result.update(max_box=float(box.max()), max_score=float(score.max()))
        if 'masks' in expected:
            result['min_mask_iou'] = float(iou.min())
    return result


def verify_detector_onnx(onnx_file, graph, shapes, image=None, seed=0,
                         num_threads=None, padded=None,
                         backend='onnxruntime'):
    """Run a detector's ONNX graph with ONNX Runtime or OpenVINO (CPU) and
    mmdet's eager ``predict`` on the same inputs, and match their
    detections.

    Args:
        onnx_file (str): The ONNX file.
        graph (DetectorGraph): The exported module.
        shapes (list[tuple[int, int]]): Height and width of each input.
        image (np.ndarray | str, optional): The image (or its file) resized to
            each size; random pixels of ``seed`` without it.
        seed (int): Defaults to 0.
        num_threads (int, optional): The runtime's intra-op threads.
        padded (tuple, optional): ``(img_shape, pad_shape)`` of one more,
            padded check (:func:`~mmtnt.deploy.verify.padded_check`).
        backend (str): ``'onnxruntime'`` or ``'openvino'`` (float32).

    Returns:
        list[dict]: Per check, :func:`match_detections`'s result with
        ``shape``, ``img_shape`` and ``ok``.
    """
    if isinstance(image, str):
        image = read_image(image)
    session = cpu_session(onnx_file, num_threads, backend=backend)
    model = graph.detector
    checks = [(detector_input(model, shape, image, seed), None)
              for shape in shapes]
    if padded is not None:
        img_shape, pad_shape = padded
        inputs = detector_input(model, img_shape, image, seed)
        checks.append((pad_input(inputs, pad_shape), img_shape))
    return [check_detector_onnx(session, graph, inputs, img_shape)
            for inputs, img_shape in checks]


def check_detector_onnx(session, graph, inputs, img_shape=None):
    """One check of :func:`verify_detector_onnx`, feeding ``img_shape`` unless
    it is None."""
    size = dict(shape=tuple(inputs.shape),
                img_shape=tuple(img_shape or inputs.shape[2:]))
    expected = eager_detections(graph.detector, inputs, img_shape)
    feed = {INPUT_NAME: inputs.numpy()}
    if img_shape is not None:
        feed[IMG_SHAPE_NAME] = np.array(img_shape, dtype=np.int64)
    try:
        outputs = session.run(None, feed)
    except Exception as error:  # the runtime's
        return dict(size, error=error, ok=False)
    actual = graph_detections(graph, outputs, size['img_shape'])
    result = match_detections(actual, expected, max(size['shape'][2:]))
    return dict(result, **size, ok=result['error'] is None)


def graph_detections(graph, outputs, img_shape):
    """A detector graph's outputs by name, its ``roi_masks`` pasted into binary
    image ``masks`` as mmdet's ``predict`` gives them.

    Args:
        graph (DetectorGraph): The exported module.
        outputs (list[np.ndarray | Tensor]): The graph's outputs.
        img_shape (tuple[int, int]): The image's size before padding.

    Returns:
        dict: ``boxes``, ``scores``, ``labels`` (and ``masks``), numpy.
    """
    found = {
        name: np.asarray(output)
        for name, output in zip(graph.output_names, outputs)
    }
    if 'roi_masks' in found:
        found['masks'] = paste_masks(
            found.pop('roi_masks'), found['boxes'], tuple(img_shape),
            graph.mask_threshold)
    return found


def describe_detector_check(check):
    """One line on a check of :func:`verify_detector_onnx`."""
    head = f'Verify {check["shape"]}'
    if check['img_shape'] != check['shape'][2:]:
        head += f', image {check["img_shape"]} padded'
    if 'count' not in check:
        return head + verdict(check)
    line = (f'{check["count"]} detections (mmdet {check["expected_count"]})'
            f', max box diff {check["max_box"]:.3g} px (tolerance '
            f'{DET_BOX_TOLERANCE:g} x {max(check["shape"][2:])}), max '
            f'score diff {check["max_score"]:.3g} (tolerance '
            f'{DET_SCORE_TOLERANCE:g})')
    if check['min_mask_iou'] is not None:
        line += f', min mask IoU {check["min_mask_iou"]:.4f}'
    return (f'{head}: {line}, {check["reordered"]} detections of near-equal '
            'scores in another order' + verdict(check))
