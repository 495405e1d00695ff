"""Verify an exported graph: ONNX Runtime (CPU) against PyTorch.

:func:`verify_onnx` runs the ONNX file and the module it was exported from
on the same inputs, one per size of ``checks`` (:func:`verify_sizes`), and
returns a :class:`VerifyReport`:

- a classifier's scores (or logits) are compared one by one, each within
  ``atol + rtol * |torch|`` of PyTorch's (:data:`CLS_TOLERANCES`), so that
  a logit off by 2 fails even on a class of score 1e-6;
- a segmentor's logits by their relative difference ``max|onnx - torch| /
  max|torch|`` (:data:`DEFAULT_TOLERANCE`);
- a detector's detections are matched with those of mmdet's own
  ``predict`` (:mod:`mmtnt.deploy.verify_detection`).
"""
import dataclasses
from typing import List

import numpy as np
import torch
from mmengine.model import BaseModel

from ..models.utils import ceil_div
from .detection import DetectorGraph
from .graphs import ClassifierGraph, export_graph, input_channels
from .runtime import INPUT_NAME, cpu_session
from .verify_detection import (describe_detector_check, verdict,
                               verify_detector_onnx)

#: Relative difference (``max|onnx - torch| / max|torch|``) accepted for a
#: segmentor.
DEFAULT_TOLERANCE = 1e-4
#: Classifiers: ``(rtol, atol)`` of each output. The scores' atol, float32's
#: smallest normal number, only absorbs scores that underflow.
CLS_TOLERANCES = dict(
    scores=(1e-3, float(np.finfo(np.float32).tiny)), logits=(1e-3, 1e-3))


def second_shape(height, width):
    """The size a dynamic export is checked at besides its export size:
    about 1.25x the height and 1.5x the width, both odd, so that its
    remainders by every stride, patch and window size differ from those of
    a size made of multiples of 32.

    Examples:
        >>> second_shape(224, 224)
        (287, 339)
    """
    return height + height // 4 + 7, width + width // 2 + 3


def verify_sizes(graph, shape, batch_size=1, dynamic=False, second=None):
    """``(batch, height, width)`` of each input to check a graph at: its
    export size, and for a dynamic export ``second`` (default
    :func:`second_shape`) at another batch, or for a detector ``second``
    and one smaller in height and larger in width.

    Args:
        graph (nn.Module): The exported module.
        shape (tuple[int, int]): The export size.
        batch_size (int): The export's batch. Defaults to 1.
        dynamic (bool): Whether the export has dynamic axes.
        second (tuple[int, int], optional): The second size.

    Returns:
        list[tuple[int, int, int]]: The checks of :func:`verify_onnx`.

    Examples:
        >>> verify_sizes(classifier_graph, (224, 224), dynamic=True)
        [(1, 224, 224), (2, 287, 339)]
        >>> verify_sizes(detector_graph, (128, 128), dynamic=True)
        [(1, 128, 128), (1, 167, 195), (1, 97, 165)]
    """
    height, width = shape
    if not dynamic:
        return [(batch_size, height, width)]
    second = tuple(second or second_shape(height, width))
    if isinstance(graph, DetectorGraph):
        third = (height - height // 4 + 1, width + width // 4 + 5)
        return [(1, height, width), (1, *second), (1, *third)]
    return [(batch_size, height, width), (batch_size + 1, *second)]


def padded_check(model, shape, dynamic):
    """``(img_shape, pad_shape)`` of the check of a padded detector input,
    as mmdet's ``DetDataPreprocessor`` pads at the ``model``'s
    ``pad_size_divisor`` (None when it does not pad): for a ``dynamic``
    graph an image of ``shape`` padded to the next multiple of the divisor,
    for a static one the input size ``shape`` holding an image half a
    divisor smaller.

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
    """``max|actual - expected| / max|expected|`` (the difference itself
    where ``expected`` is all zeros).

    Examples:
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
    |expected|`` of ``expected`` (a NaN is the farthest): its ``index``,
    the ``actual`` and ``expected`` values there, ``ratio`` (their
    difference over what is allowed there: above 1, or NaN, it is outside),
    ``rtol`` and ``atol``.

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
    """What :func:`verify_onnx` found: one check per input. Iterating a
    report goes through its checks.

    Attributes:
        task (str): ``'classifier'``, ``'segmentor'`` (any other module's
            output is compared as a segmentor's) or ``'detector'``.
        output_name (str): The graph's (first) output.
        checks (list[dict]): Per input, ``shape`` (N, C, H, W), ``ok`` and
            ``error`` (None when all went well); classifiers and segmentors
            ``max_abs`` and ``relative``, classifiers also ``worst``
            (:func:`worst_element`); detectors ``img_shape`` and what
            :func:`~mmtnt.deploy.verify_detection.match_detections`
            returns.
        tolerance (float): A segmentor's largest relative difference.
    """
    task: str
    output_name: str
    checks: List[dict]
    tolerance: float = DEFAULT_TOLERANCE

    @property
    def passed(self):
        """Whether every check is within its tolerances."""
        return all(check['ok'] for check in self.checks)

    def lines(self):
        """One line per check, ending in ``OK`` or ``FAILED``."""
        return [self.describe(check) for check in self.checks]

    def describe(self, check):
        """One line on a check (one of :attr:`checks`)."""
        if self.task == 'detector':
            return describe_detector_check(check)
        head = f'Verify {check["shape"]}: '
        if check['error'] is not None:
            return f'{head}FAILED, {check["error"]}'
        if self.task == 'segmentor':
            return (f'{head}max abs diff {check["max_abs"]:.3g}, relative '
                    f'diff {check["relative"]:.3g} (max|onnx - torch| / '
                    f'max|torch|, tolerance {self.tolerance:g})'
                    + verdict(check))
        worst = check['worst']
        image, label = worst['index']
        return (f'{head}max abs diff {check["max_abs"]:.3g}; '
                f'{self.output_name} elementwise, |onnx - torch| <= '
                f'{worst["atol"]:.3g} + {worst["rtol"]:g} x |torch|: the '
                f'farthest, class {label} of image {image} (onnx '
                f'{worst["actual"]:.6g}, torch {worst["expected"]:.6g}), is '
                f'at {worst["ratio"]:.3g}x the allowed difference'
                + verdict(check))

    def __iter__(self):
        return iter(self.checks)

    def __len__(self):
        return len(self.checks)

    def __str__(self):
        return '\n'.join(self.lines())


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
        graph (nn.Module): The exported module, or a model of
            :func:`~mmtnt.deploy.build_model` (its graph is run).
        checks (list[tuple[int, int, int]]): ``(batch, height, width)`` of
            each input (:func:`verify_sizes`); a detector's batch is 1.
        channels (int, optional): Channels of the random inputs (of
            ``seed``). Defaults to the model's.
        seed (int): Defaults to 0.
        num_threads (int, optional): ONNX Runtime's intra-op threads.
        tolerance (float): Segmentors: the largest relative difference.
        logits (bool): For a classifier given as a model: the file holds
            the logits, not the scores. Defaults to False.
        image (np.ndarray | str, optional): Detectors: the image (BGR, or
            its file) resized to each size; random pixels without it.
        padded (tuple, optional): Detectors: ``(img_shape, pad_shape)`` of
            one more check, a padded input (:func:`padded_check`).

    Returns:
        VerifyReport: What each check found.

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
        if any(batch != 1 for batch, _, _ in checks):
            raise ValueError('Detectors are checked on one image: the batch '
                             'of each check must be 1.')
        results = verify_detector_onnx(
            onnx_file, graph, [check[1:] for check in checks], image, seed,
            num_threads, padded)
        return VerifyReport('detector', graph.output_names[0], results)
    channels = channels or input_channels(graph)
    classifier = isinstance(graph, ClassifierGraph)
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
            result['relative'] = relative_difference(actual, expected)
            result['max_abs'] = float(
                np.abs(actual.astype(np.float64) - expected).max())
            if classifier:
                result['worst'] = worst_element(
                    actual, expected, *CLS_TOLERANCES[graph.output_name])
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
