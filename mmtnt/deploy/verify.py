"""Verify an exported graph: ONNX Runtime (CPU) against PyTorch.

:func:`verify_onnx` runs the ONNX file and the module it was exported from
on the same inputs, one per size of ``checks`` (:func:`verify_sizes` gives
those the command line checks: the export size and, for a dynamic export,
one more size and batch, or for a detector two more sizes), and returns a
:class:`VerifyReport`.

- A classifier's scores (or logits) are compared one by one on random
  input: each within ``atol + rtol * |torch|`` of PyTorch's
  (:data:`CLS_TOLERANCES`), so that a logit off by 2 fails even on a class
  of score 1e-6, which a difference relative to the largest score would
  hide.
- A segmentor's logits, on random input: the relative difference
  ``max|onnx - torch| / max|torch|`` must not exceed ``tolerance``
  (:data:`DEFAULT_TOLERANCE`).
- A detector's detections are matched with those of mmdet's own eager
  ``predict`` (:mod:`mmtnt.deploy.verify_detection`), on an image resized
  to each size, and on a padded input with its ``img_shape``
  (:func:`padded_check`).
"""
import dataclasses
import os.path as osp
from typing import List

import numpy as np
import torch
from mmengine.model import BaseModel

from ..models.utils import ceil_div
from .detection import DetectorGraph
from .graphs import ClassifierGraph, export_graph, input_channels
from .runtime import INPUT_NAME, cpu_session
from .verify_detection import describe_detector_check, verify_detector_onnx

#: Relative difference (``max|onnx - torch| / max|torch|``) accepted for a
#: segmentor.
DEFAULT_TOLERANCE = 1e-4
#: Classifiers: ``(rtol, atol)`` of each output, which must be within
#: ``atol + rtol * |torch|`` of PyTorch's. A logit off by 2 changes its
#: class's score by a factor of about e**2 (or e**-2), however small the
#: score: the scores' atol, float32's smallest normal number, only absorbs
#: scores that underflow.
CLS_TOLERANCES = dict(
    scores=(1e-3, float(np.finfo(np.float32).tiny)), logits=(1e-3, 1e-3))


def second_shape(height, width):
    """The size a dynamic export is checked at besides its export size:
    about 1.25x the height and 1.5x the width, both odd, so that its
    remainders by every stride, patch and window size differ from those of
    a size made of multiples of 32 (other paddings and masks).

    Examples:
        >>> second_shape(224, 224)
        (287, 339)
    """
    return height + height // 4 + 7, width + width // 2 + 3


def detector_shapes(shape, second=None):
    """The input sizes a dynamic detector export is checked at: ``shape``,
    ``second`` (default :func:`second_shape`) and one smaller than
    ``shape`` in height and larger in width, both odd.

    Examples:
        >>> detector_shapes((128, 128))
        [(128, 128), (167, 195), (97, 165)]
    """
    height, width = shape
    second = tuple(second or second_shape(height, width))
    third = (height - height // 4 + 1, width + width // 4 + 5)
    return [tuple(shape), second, third]


def verify_sizes(graph, shape, batch_size=1, dynamic=False, second=None):
    """``(batch, height, width)`` of each input to check a graph at: its
    export size, and for a dynamic export one more (classifiers and
    segmentors, another batch, :func:`second_shape`) or two more
    (detectors, :func:`detector_shapes`).

    Args:
        graph (nn.Module): The exported module.
        shape (tuple[int, int]): The export size.
        batch_size (int): The export's batch. Defaults to 1.
        dynamic (bool): Whether the export has dynamic axes.
            Defaults to False.
        second (tuple[int, int], optional): The second size of a dynamic
            export. Defaults to :func:`second_shape`.

    Returns:
        list[tuple[int, int, int]]: The checks of :func:`verify_onnx`.

    Examples:
        >>> verify_sizes(graph, (224, 224), dynamic=True)  # a classifier
        [(1, 224, 224), (2, 287, 339)]
    """
    shape = tuple(shape)
    if not dynamic:
        return [(batch_size, *shape)]
    if isinstance(graph, DetectorGraph):
        return [(1, *size) for size in detector_shapes(shape, second)]
    other = tuple(second or second_shape(*shape))
    return [(batch_size, *shape), (batch_size + 1, *other)]


def padded_check(model, shape, dynamic):
    """The image size and padded input size of the check of a padded
    detector input, as mmdet's ``DetDataPreprocessor`` pads at the model's
    ``pad_size_divisor``.

    A dynamic graph gets an image of ``shape`` padded to the next multiple
    of the divisor; a static one its input size ``shape``, holding an image
    half a divisor smaller.

    Args:
        model (nn.Module): The detector.
        shape (tuple[int, int]): Height and width.
        dynamic (bool): Whether the graph takes other sizes.

    Returns:
        tuple | None: ``(img_shape, pad_shape)``; None when the
        preprocessor does not pad.

    Examples:
        >>> padded_check(model, (97, 165), True)  # pad_size_divisor=32
        ((97, 165), (128, 192))
    """
    divisor = getattr(model.data_preprocessor, 'pad_size_divisor', 1)
    if divisor <= 1:
        return None
    if not dynamic:
        return tuple(size - divisor // 2 for size in shape), tuple(shape)
    return tuple(shape), tuple(ceil_div(size, divisor) * divisor
                               for size in shape)


def relative_difference(actual, expected):
    """``max|actual - expected| / max|expected|`` (0 for two zero arrays).

    Examples:
        >>> import numpy as np
        >>> relative_difference(np.array([1., 2.]), np.array([1., 4.]))
        0.5
    """
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    if actual.shape != expected.shape:
        raise ValueError(f'ONNX Runtime returned shape {actual.shape}, '
                         f'PyTorch {expected.shape}.')
    scale = np.abs(expected).max()
    error = np.abs(actual - expected).max()
    return float(error / scale) if scale > 0 else float(error)


def worst_element(actual, expected, rtol, atol):
    """The element of ``actual`` farthest outside ``atol + rtol *
    |expected|`` of ``expected`` (a NaN is the farthest).

    Args:
        actual (np.ndarray): ONNX Runtime's output.
        expected (np.ndarray): PyTorch's, of the same shape.
        rtol (float): Allowed difference, relative to ``|expected|``.
        atol (float): Allowed absolute difference.

    Returns:
        dict: ``index`` (a tuple), ``actual`` and ``expected`` (the values
        there), ``ratio`` (their difference over what is allowed there:
        above 1, or NaN, it is outside), ``rtol`` and ``atol``.

    Examples:
        >>> worst = worst_element(np.array([.5, 4e-5]),
        ...                       np.array([.5, 5e-6]), 1e-3, 1e-12)
        >>> worst['index'], worst['ratio'] > 1
        ((1,), True)
    """
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    ratio = np.abs(actual - expected) / (atol + rtol * np.abs(expected))
    index = np.unravel_index(np.argmax(ratio), ratio.shape)
    return dict(
        index=tuple(int(i) for i in index),
        actual=float(actual[index]),
        expected=float(expected[index]),
        ratio=float(ratio[index]),
        rtol=rtol,
        atol=atol)


@dataclasses.dataclass
class VerifyReport:
    """What :func:`verify_onnx` found: one entry per input checked.
    Iterating a report goes through its checks.

    Attributes:
        task (str): ``'classifier'``, ``'segmentor'`` (any other module's
            output is compared as a segmentor's) or ``'detector'``.
        output_name (str): The graph's (first) output: ``'scores'``,
            ``'logits'``, ``'seg_logits'`` or ``'boxes'``.
        checks (list[dict]): Per input, ``shape`` (N, C, H, W), ``ok``
            (whether it is within the tolerances), ``error`` (ONNX
            Runtime's exception or, for a detector, why the detections did
            not match; None when all went well) and:

            - classifiers and segmentors: ``max_abs`` (``max|onnx -
              torch|``) and ``relative`` (that over ``max|torch|``), both
              infinite after an exception; classifiers also ``worst``,
              their element farthest from PyTorch's by
              :data:`CLS_TOLERANCES` (:func:`worst_element`; None after an
              exception);
            - detectors: ``img_shape`` (the image's size within the
              input) and what
              :func:`~mmtnt.deploy.verify_detection.match_detections`
              returns: ``count``, ``expected_count`` (mmdet's),
              ``max_box`` (pixels), ``max_score``, ``min_mask_iou`` and
              ``reordered`` (near-equal scores in another order); absent
              after an exception of ONNX Runtime.
        tolerance (float): A segmentor's largest relative difference.

    Examples:
        >>> report = verify_onnx('upernet.onnx', graph, [(1, 128, 128)])
        >>> report.passed, [check['relative'] < 1e-4 for check in report]
        (True, [True])
        >>> print(report)
        Verify (1, 3, 128, 128): max abs diff 1.08e-07, relative diff 5.84e-07 (max|onnx - torch| / max|torch|, tolerance 0.0001): OK
    """  # noqa: E501
    task: str
    output_name: str
    checks: List[dict]
    tolerance: float = DEFAULT_TOLERANCE

    @property
    def passed(self):
        """Whether every check is within its tolerances."""
        return all(check['ok'] for check in self.checks)

    def lines(self):
        """One line per check, ending in ``OK`` or ``FAILED``, as the
        command line prints them."""
        return [self.describe(check) for check in self.checks]

    def describe(self, check):
        """One line on a check (one of :attr:`checks`)."""
        if self.task == 'detector':
            return describe_detector_check(check)
        if check['error'] is not None:
            return f'Verify {check["shape"]}: FAILED, {check["error"]}'
        if self.task == 'classifier':
            return describe_classifier_check(check, self.output_name)
        return describe_segmentor_check(check, self.tolerance)

    def __iter__(self):
        return iter(self.checks)

    def __len__(self):
        return len(self.checks)

    def __str__(self):
        return '\n'.join(self.lines())


def describe_classifier_check(check, output_name):
    """One line on a classifier's check of :func:`verify_onnx`.

    Args:
        check (dict): One check, with ``worst``.
        output_name (str): ``'scores'`` or ``'logits'``.

    Returns:
        str: The line.
    """
    worst = check['worst']
    image, label = worst['index']
    line = (f'Verify {check["shape"]}: max abs diff '
            f'{check["max_abs"]:.3g}; {output_name} elementwise, |onnx - '
            f'torch| <= {worst["atol"]:.3g} + {worst["rtol"]:g} x |torch|: '
            f'the farthest, class {label} of image {image} (onnx '
            f'{worst["actual"]:.6g}, torch {worst["expected"]:.6g}), is at '
            f'{worst["ratio"]:.3g}x the allowed difference')
    return line + (': OK' if check['ok'] else ': FAILED')


def describe_segmentor_check(check, tolerance):
    """One line on a segmentor's check of :func:`verify_onnx`, against
    ``tolerance``."""
    return (f'Verify {check["shape"]}: max abs diff '
            f'{check["max_abs"]:.3g}, relative diff '
            f'{check["relative"]:.3g} (max|onnx - torch| / max|torch|, '
            f'tolerance {tolerance:g}): {"OK" if check["ok"] else "FAILED"}')


def verify_onnx(onnx_file,
                graph,
                checks,
                channels=None,
                seed=0,
                num_threads=None,
                tolerance=DEFAULT_TOLERANCE,
                logits=False,
                image=None,
                padded=None):
    """Run an ONNX graph with ONNX Runtime (CPU) and the module it was
    exported from with PyTorch on the same inputs, and compare.

    Args:
        onnx_file (str): The ONNX file.
        graph (nn.Module): The exported module (a graph of
            :func:`~mmtnt.deploy.graphs.export_graph`), or a model from
            :func:`~mmtnt.deploy.build_model` (its graph is run).
        checks (list[tuple[int, int, int]]): ``(batch, height, width)`` of
            each input (:func:`verify_sizes`); a detector's batch is 1.
        channels (int, optional): Image channels of the random inputs.
            Defaults to the model's.
        seed (int): Seed of the random inputs (standard-normal for
            classifiers and segmentors, pixels for detectors without
            ``image``). Defaults to 0.
        num_threads (int, optional): ONNX Runtime's intra-op threads.
        tolerance (float): Segmentors: the largest relative difference.
            Defaults to :data:`DEFAULT_TOLERANCE`.
        logits (bool): For a classifier given as a model: the file holds
            the logits, not the scores. Defaults to False.
        image (np.ndarray | str, optional): Detectors: the image (BGR, as
            loaded, or its file) resized to each size; random pixels
            without it.
        padded (tuple, optional): Detectors: ``(img_shape, pad_shape)`` of
            one more check, a padded input (:func:`padded_check`).

    Returns:
        VerifyReport: Per check, the sizes and differences (detectors:
        matched and reordered detections), and whether it passed.

    Raises:
        ValueError: For a detector check of another batch than 1, or an
            image that cannot be read.

    Examples:
        >>> from mmtnt.deploy import (build_model, export_graph, export_onnx,
        ...                           verify_onnx, verify_sizes)
        >>> graph = export_graph(build_model(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py'))
        >>> ranges = export_onnx(graph, 'tnt.onnx', (32, 32), dynamic=True)
        >>> report = verify_onnx('tnt.onnx', graph,
        ...                      verify_sizes(graph, (32, 32), dynamic=True))
        >>> report.passed, len(report)
        (True, 2)
    """
    if isinstance(graph, BaseModel):
        graph = export_graph(graph, logits)
    if isinstance(graph, DetectorGraph):
        return _verify_detector(onnx_file, graph, checks, seed, num_threads,
                                image, padded)
    if channels is None:
        channels = input_channels(graph)
    classifier = isinstance(graph, ClassifierGraph)
    tolerances = CLS_TOLERANCES[graph.output_name] if classifier else None
    session = cpu_session(onnx_file, num_threads)
    generator = torch.Generator().manual_seed(seed)
    results = []
    for batch, height, width in checks:
        inputs = torch.randn(
            batch, channels, height, width, generator=generator)
        with torch.no_grad():
            expected = graph(inputs).numpy()
        result = dict(shape=tuple(inputs.shape), error=None)
        if classifier:
            result['worst'] = None
        try:
            actual = session.run(None, {INPUT_NAME: inputs.numpy()})[0]
            result.update(
                max_abs=float(
                    np.abs(actual.astype(np.float64) - expected).max()),
                relative=relative_difference(actual, expected))
            if classifier:
                result['worst'] = worst_element(actual, expected,
                                                *tolerances)
        except Exception as error:  # ONNX Runtime's or a shape mismatch
            result.update(
                max_abs=float('inf'), relative=float('inf'), error=error)
        if result['error'] is not None:
            result['ok'] = False
        elif classifier:
            result['ok'] = result['worst']['ratio'] <= 1
        else:
            result['ok'] = result['relative'] <= tolerance
        results.append(result)
    return VerifyReport(
        task='classifier' if classifier else 'segmentor',
        output_name=getattr(graph, 'output_name', 'output'),
        checks=results,
        tolerance=tolerance)


def read_image(path):
    """The image file ``path`` as mmcv loads it (BGR); a ValueError when
    it cannot be read."""
    import mmcv
    image = mmcv.imread(path) if osp.isfile(path) else None
    if image is None:
        raise ValueError(f'Cannot read the image {path}.')
    return image


def _verify_detector(onnx_file, graph, checks, seed, num_threads, image,
                     padded):
    """:func:`verify_onnx` of a :class:`~mmtnt.deploy.DetectorGraph`."""
    if any(batch != 1 for batch, _, _ in checks):
        raise ValueError('Detectors are checked on one image: the batch of '
                         'each check must be 1.')
    if isinstance(image, str):
        image = read_image(image)
    shapes = [(height, width) for _, height, width in checks]
    results = verify_detector_onnx(onnx_file, graph, shapes, image, seed,
                                   num_threads, padded)
    return VerifyReport(
        task='detector', output_name=graph.output_names[0], checks=results)
