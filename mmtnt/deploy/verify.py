"""Verify an exported graph: ONNX Runtime or OpenVINO (CPU) against PyTorch.

:func:`verify_onnx` runs both on the same inputs (:func:`verify_sizes`):
classifier outputs are compared element by element within
``atol + rtol * |torch|`` (:data:`CLS_TOLERANCES`), segmentor logits by
their relative difference (:data:`DEFAULT_TOLERANCE`), and detections are
matched with mmdet's ``predict`` (:mod:`mmtnt.deploy.verify_detection`).
OpenVINO's bfloat16 is held to :data:`BF16_TOLERANCE` instead.
"""
import dataclasses
from typing import List

import numpy as np
import torch
from mmengine.model import BaseModel

from ..models.utils import ceil_div
from .detection import DetectorGraph
from .graphs import ClassifierGraph, export_graph, input_channels
from .runtime import BACKENDS, INPUT_NAME, check_choice, cpu_session
from .verify_detection import (describe_detector_check, verdict,
                               verify_detector_onnx)

#: Relative difference (``max|onnx - torch| / max|torch|``) accepted for a
#: segmentor.
DEFAULT_TOLERANCE = 1e-4
#: Classifiers: ``(rtol, atol)`` of each output. The scores' atol, float32's
#: smallest normal number, only absorbs scores that underflow.
CLS_TOLERANCES = dict(
    scores=(1e-3, float(np.finfo(np.float32).tiny)), logits=(1e-3, 1e-3))
#: OpenVINO bf16, classifiers and segmentors: the largest relative
#: difference (``max|bf16 - torch| / max|torch|``). bfloat16 keeps 8
#: significant bits (a rounding of 2**-9 = 2e-3 per value); the S
#: classifiers' logits land within 1e-2 of their largest logit.
BF16_TOLERANCE = 3e-2
#: The precisions :func:`verify_onnx` checks (INT8 is scored on data by
#: :func:`~mmtnt.deploy.evaluate_onnx`).
VERIFY_PRECISIONS = ('fp32', 'bf16')


def second_shape(height, width):
    """The second size a dynamic export is checked at: odd, so that its
    remainders by every stride, patch and window size differ.

    Examples:
        >>> second_shape(224, 224)
        (287, 339)
    """
    return height + height // 4 + 7, width + width // 2 + 3


def verify_sizes(graph, shape, batch_size=1, dynamic=False, second=None):
    """``(batch, height, width)`` of each input to check a graph at.

    The export size; for a dynamic export also ``second`` (default
    :func:`second_shape`) at another batch, and for a detector one more size.

    Args:
        graph (nn.Module): The exported module.
        shape (tuple[int, int]): The export size.
        batch_size (int): The export's batch. Defaults to 1.
        dynamic (bool): Whether the export has dynamic axes.
        second (tuple[int, int], optional): The second size.

    Returns:
        list[tuple[int, int, int]]: The checks of :func:`verify_onnx`.
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
    """``(img_shape, pad_shape)`` of the check of a padded detector input.

    An image of ``shape`` padded as mmdet's ``DetDataPreprocessor`` pads it
    (``dynamic``), or ``shape`` holding a smaller image (static); None when the
    model does not pad.

    Examples:
        >>> padded_check(model, (97, 165), True)  # doctest: +SKIP
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
    """``max|actual - expected| / max|expected|`` (the difference where
    ``expected`` is all zeros)."""
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    if actual.shape != expected.shape:
        raise ValueError(f'ONNX Runtime returned shape {actual.shape}, '
                         f'PyTorch {expected.shape}.')
    scale = np.abs(expected).max()
    error = np.abs(actual - expected).max()
    return float(error / scale) if scale > 0 else float(error)


def worst_element(actual, expected, rtol, atol):
    """The element of ``actual`` farthest outside ``atol + rtol * |expected|``:
    its ``index``, ``actual``, ``expected``, ``ratio`` (> 1 is outside),
    ``rtol`` and ``atol``."""
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
    """What :func:`verify_onnx` found: one check per input (iterable).

    Attributes:
        task (str): ``'classifier'``, ``'segmentor'`` or ``'detector'``.
        output_name (str): The graph's (first) output.
        checks (list[dict]): Per input, ``shape``, ``ok`` and ``error``, and
            the task's differences.
        tolerance (float): The largest relative difference of a segmentor
            or of a bf16 graph.
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
        if check.get('worst') is None:  # segmentors, bf16
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
                padded=None,
                backend='onnxruntime',
                precision='fp32'):
    """Run an ONNX graph with ONNX Runtime or OpenVINO (CPU) and its module
    with PyTorch on the same inputs, and compare.

    Args:
        onnx_file (str): The ONNX file.
        graph (nn.Module): The exported module, or a model of
            :func:`~mmtnt.deploy.build_model`.
        checks (list[tuple[int, int, int]]): ``(batch, height, width)`` of each
            input (:func:`verify_sizes`); a detector's batch is 1.
        channels (int, optional): Channels of the inputs. Defaults to the
            model's.
        seed (int): Seed of the random inputs. Defaults to 0.
        num_threads (int, optional): The runtime's intra-op threads.
        tolerance (float): Segmentors: the largest relative difference.
        logits (bool): A classifier model's file holds logits. Defaults to
            False.
        image (np.ndarray | str, optional): Detectors: the image (BGR, or its
            file) resized to each size; random pixels without it.
        padded (tuple, optional): Detectors: ``(img_shape, pad_shape)`` of one
            more, padded check (:func:`padded_check`).
        backend (str): ``'onnxruntime'`` or ``'openvino'``
            (:func:`~mmtnt.deploy.cpu_session`).
        precision (str): ``'fp32'``, or ``'bf16'`` (OpenVINO; classifiers
            and segmentors, held to :data:`BF16_TOLERANCE`).

    Returns:
        VerifyReport: What each check found.

    Examples:
        >>> graph = export_graph(build_model(  # doctest: +SKIP
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py'))
        >>> ranges = export_onnx(graph, 'tnt.onnx', (32, 32))  # doctest: +SKIP
        >>> report = verify_onnx('tnt.onnx', graph,  # doctest: +SKIP
        ...                      verify_sizes(graph, (32, 32)))
        >>> report.passed  # doctest: +SKIP
        True
    """
    check_choice('backend', backend, BACKENDS)
    check_choice('verify precision', precision, VERIFY_PRECISIONS)
    if isinstance(graph, BaseModel):
        graph = export_graph(graph, logits)
    if isinstance(graph, DetectorGraph):
        if any(batch != 1 for batch, _, _ in checks):
            raise ValueError('Detectors are checked on one image: the batch '
                             'of each check must be 1.')
        if precision != 'fp32':
            raise ValueError(
                'Detectors are verified at fp32 (bf16 reorders near-equal '
                'scores): score a bf16 detector with the evaluator '
                '(tools/deployment/test.py --precision bf16).')
        results = verify_detector_onnx(
            onnx_file, graph, [check[1:] for check in checks], image, seed,
            num_threads, padded, backend)
        return VerifyReport('detector', graph.output_names[0], results)
    channels = channels or input_channels(graph)
    classifier = isinstance(graph, ClassifierGraph)
    bf16 = precision == 'bf16'
    if bf16:
        tolerance = BF16_TOLERANCE
    session = cpu_session(
        onnx_file, num_threads, backend=backend, precision=precision)
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
            if classifier and not bf16:
                result['worst'] = worst_element(
                    actual, expected, *CLS_TOLERANCES[graph.output_name])
        except Exception as error:  # the runtime's or a shape mismatch
            result.update(
                max_abs=float('inf'), relative=float('inf'), error=error)
        if result['error'] is not None:
            result['ok'] = False
        elif classifier and not bf16:
            result['ok'] = result['worst']['ratio'] <= 1
        else:
            result['ok'] = result['relative'] <= tolerance
        results.append(result)
    return VerifyReport(
        task='classifier' if classifier else 'segmentor',
        output_name=getattr(graph, 'output_name', 'output'),
        checks=results,
        tolerance=tolerance)
