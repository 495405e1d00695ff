"""What is exported of each model: the modules that :func:`export_graph`
wraps a classifier, segmentor or detector in.

- classifiers (mmpretrain ``ImageClassifier``, configs with
  ``default_scope='mmpretrain'``): images -> class scores (N, num_classes),
  the head's logits through softmax (sigmoid for multi-label heads), i.e.
  the ``pred_score`` of mmpretrain's ``predict``; with ``logits=True`` the
  logits themselves (``model(x, mode='tensor')``) (:class:`ClassifierGraph`);
- segmentors (mmseg ``EncoderDecoder``, ``default_scope='mmseg'``): images
  -> segmentation logits (N, num_classes, H, W) at the input resolution,
  i.e. ``model.encode_decode`` (the decode head's logits resized
  bilinearly to the input), what ``test_cfg=dict(mode='whole')`` inference
  computes before the arg-max. Sliding-window inference is not part of the
  graph (:class:`SegmentorGraph`);
- detectors (mmdet RetinaNet, and Mask R-CNN / Faster R-CNN: RPNHead with a
  StandardRoIHead; ``default_scope='mmdet'``): one image (1, C, H, W) ->
  its detections after post-processing, as mmdet's ``predict(...,
  rescale=False)`` (:class:`mmtnt.deploy.DetectorGraph`).

The input is the image as the model receives it (N, C, H, W) in float32:
already normalised by the config's data preprocessor (``(img - mean) /
std``, channels in its order, :func:`describe_preprocessing`). The plain
model is wrapped: mmtnt's CPU accelerator (``mmtnt.accelerate_for_cpu``)
is not applied. During the export (:func:`export_friendly`), a few of the
model's computations take forms that ONNX Runtime runs better, with the
same result: adaptive pooling and bicubic resizing as matrix products
(:class:`AdaptiveAvgPool2dGraph`, :func:`graph_interpolation`), attention
as explicit products, in parts over large token maps
(:func:`graph_attention`).
"""
import contextlib
from unittest import mock

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..models.layers import attention as attention_layers
from . import chunked_attention
from .detection import DetectorGraph


class ClassifierGraph(nn.Module):
    """What is exported of an image classifier: images -> class scores.

    Args:
        classifier (nn.Module): An mmpretrain ``ImageClassifier`` with a
            head.
        logits (bool): Return the head's logits instead of the scores.
            Defaults to False.

    Examples:
        >>> import torch
        >>> from mmtnt.deploy import ClassifierGraph, build_model
        >>> graph = ClassifierGraph(build_model(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py')).eval()
        >>> scores = graph(torch.rand(2, 1, 32, 32))
        >>> scores.shape, bool(scores.sum(dim=1).allclose(torch.ones(2)))
        (torch.Size([2, 10]), True)
    """
    output_name = 'scores'

    def __init__(self, classifier, logits=False):
        super().__init__()
        self.classifier = classifier
        self.logits = logits
        if logits:
            self.output_name = 'logits'

    def forward(self, inputs):
        logits = self.classifier(inputs, mode='tensor')
        if self.logits:
            return logits
        from mmpretrain.models.heads import MultiLabelClsHead
        if isinstance(self.classifier.head, MultiLabelClsHead):
            return logits.sigmoid()
        return logits.softmax(dim=-1)


class SegmentorGraph(nn.Module):
    """What is exported of a segmentor: images -> segmentation logits at the
    input resolution (``encode_decode``: the decode head's output resized
    to the input, before soft-max and arg-max).

    Args:
        segmentor (nn.Module): An mmseg ``EncoderDecoder``.

    Examples:
        >>> import torch
        >>> from mmtnt.deploy import SegmentorGraph, build_model
        >>> graph = SegmentorGraph(build_model('configs/demo/'
        ...     'upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py')).eval()
        >>> graph(torch.rand(1, 3, 96, 160)).shape
        torch.Size([1, 5, 96, 160])
    """
    output_name = 'seg_logits'

    def __init__(self, segmentor):
        super().__init__()
        self.segmentor = segmentor

    def forward(self, inputs):
        # An img_shape that is a torch.Size is the output size for every
        # mmseg decode head; under torch.export its sizes stay symbolic.
        img_metas = [dict(img_shape=inputs.shape[2:])]
        return self.segmentor.encode_decode(inputs, img_metas)


#: The graph classes of :func:`export_graph`, by the attribute that holds
#: the wrapped model.
GRAPHS = {
    'classifier': ClassifierGraph,
    'segmentor': SegmentorGraph,
    'detector': DetectorGraph,
}


def is_detector(model):
    """Whether ``model`` is an mmdet detector."""
    from mmdet.models.detectors import BaseDetector
    return isinstance(model, BaseDetector)


def export_graph(model, logits=False, mask_output='roi'):
    """The module that is exported for a model (see the module docstring).

    Args:
        model (nn.Module): A model from :func:`mmtnt.deploy.build_model`.
        logits (bool): Classifiers: the logits instead of the scores.
            Defaults to False.
        mask_output (str): Mask R-CNN: ``'roi'`` outputs each detection's
            mask probabilities ``roi_masks`` (K, M, M), pasted afterwards
            by :func:`mmtnt.deploy.paste_masks`; ``'image'`` pastes them in
            the graph (``masks`` (K, h, w) bool, more memory). Defaults to
            ``'roi'``.

    Returns:
        ClassifierGraph | SegmentorGraph | DetectorGraph: In eval mode.

    Examples:
        >>> from mmtnt.deploy import build_model, export_graph
        >>> graph = export_graph(build_model(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py'), logits=True)
        >>> type(graph).__name__, graph.output_name
        ('ClassifierGraph', 'logits')
    """
    from mmpretrain.models import ImageClassifier
    if isinstance(model, ImageClassifier):
        return ClassifierGraph(model, logits=logits).eval()
    if is_detector(model):
        return DetectorGraph(model, mask_output=mask_output).eval()
    return SegmentorGraph(model).eval()


def is_graph(module):
    """Whether ``module`` is one of the graphs of :func:`export_graph`."""
    return isinstance(module, tuple(GRAPHS.values()))


def wrapped_model(graph):
    """The model that a graph of :func:`export_graph` wraps; None for any
    other module."""
    for name, graph_class in GRAPHS.items():
        if isinstance(graph, graph_class):
            return getattr(graph, name)
    return None


def output_names(graph):
    """The names of the outputs of a graph of :func:`export_graph` (any
    other module: ``['output']``)."""
    if isinstance(graph, DetectorGraph):
        return list(graph.output_names)
    return [getattr(graph, 'output_name', 'output')]


def input_channels(model):
    """The image channels the model takes: those its data preprocessor
    normalises, else 3.

    Args:
        model (nn.Module): A model from :func:`mmtnt.deploy.build_model`,
            or a graph of :func:`export_graph` (its model's); any other
            module takes 3.

    Returns:
        int: The channels.
    """
    if is_graph(model):
        model = wrapped_model(model)
    preprocessor = getattr(model, 'data_preprocessor', None)
    mean = getattr(preprocessor, 'mean', None)
    return 3 if mean is None else int(mean.shape[0])


def channels_reversed(preprocessor):
    """Whether a data preprocessor reverses the channels (BGR to RGB):
    mmpretrain's ``to_rgb``, mmseg's ``bgr_to_rgb`` (or ``rgb_to_bgr``),
    mmengine's and mmdet's ``_channel_conversion``."""
    return any(
        getattr(preprocessor, name, False)
        for name in ('to_rgb', 'channel_conversion', '_channel_conversion'))


def describe_preprocessing(model):
    """One line saying how the graph's input must be normalised.

    Examples:
        >>> from mmtnt.deploy import build_model, describe_preprocessing
        >>> print(describe_preprocessing(build_model('configs/demo/'
        ...     'upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py')))
        The graph takes (img - mean) / std, mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], channels reversed from the order images are loaded in (BGR to RGB).
    """  # noqa: E501
    preprocessor = model.data_preprocessor
    mean = getattr(preprocessor, 'mean', None)
    if mean is None:
        return 'The graph takes the image unnormalised.'
    mean = [round(float(v), 3) for v in mean.flatten()]
    std = [round(float(v), 3) for v in preprocessor.std.flatten()]
    order = ('reversed from the order images are loaded in (BGR to RGB)'
             if channels_reversed(preprocessor) else
             'in the order images are loaded in')
    return (f'The graph takes (img - mean) / std, mean={mean}, std={std}, '
            f'channels {order}.')


class AdaptiveAvgPool2dGraph(nn.Module):
    """``nn.AdaptiveAvgPool2d`` as two products with averaging matrices,
    built from the input size inside the graph.

    PyTorch's decomposition of adaptive average pooling for the ONNX exporter
    takes the pooling windows of the example input as constants, so an
    exported graph would pool a map of another size wrongly (mmseg's
    pyramid pooling in UPerHead and PSPHead). Window ``i`` of ``s`` over
    ``n`` positions is ``[floor(i * n / s), ceil((i + 1) * n / s))``, as in
    PyTorch.

    Args:
        output_size (int | tuple[int | None, int | None]): As for
            ``nn.AdaptiveAvgPool2d`` (None keeps the input's size).

    Examples:
        >>> import torch
        >>> x = torch.rand(2, 4, 13, 7)
        >>> pool = AdaptiveAvgPool2dGraph((3, 2))
        >>> torch.allclose(pool(x), nn.AdaptiveAvgPool2d((3, 2))(x))
        True
    """

    def __init__(self, output_size):
        super().__init__()
        if isinstance(output_size, int):
            output_size = (output_size, output_size)
        self.output_size = tuple(output_size)

    @staticmethod
    def averaging_matrix(in_size, out_size, x):
        """(out_size, in_size) weights averaging each window, in the dtype
        and on the device of ``x``."""
        i = torch.arange(out_size, device=x.device)
        start = torch.div(i * in_size, out_size, rounding_mode='floor')
        end = torch.div((i + 1) * in_size + out_size - 1, out_size,
                        rounding_mode='floor')
        j = torch.arange(in_size, device=x.device)
        inside = (j[None] >= start[:, None]) & (j[None] < end[:, None])
        return inside.to(x.dtype) / (end - start)[:, None].to(x.dtype)

    def forward(self, x):
        height, width = x.shape[-2:]
        out_h, out_w = (size if out is None else out
                        for out, size in zip(self.output_size, (height,
                                                                width)))
        rows = self.averaging_matrix(height, out_h, x)
        cols = self.averaging_matrix(width, out_w, x)
        return rows @ x @ cols.transpose(0, 1)


#: ``torch.nn.functional.interpolate``, which :func:`graph_interpolation`
#: replaces for a while.
PLAIN_INTERPOLATE = F.interpolate
#: The ``a`` of the cubic convolution kernel of PyTorch's (and ONNX's)
#: bicubic interpolation.
CUBIC_A = -0.75


def cubic_weights(t):
    """The weights of the 4 taps at ``floor(x) - 1 .. floor(x) + 2`` of
    cubic convolution (``a`` = :data:`CUBIC_A`) at ``x``, for its
    fractional parts ``t`` (..., ), as PyTorch's bicubic interpolation
    computes them.

    Returns:
        Tensor: Shape (..., 4); each row sums to 1.

    Examples:
        >>> cubic_weights(torch.tensor([0., 0.5]))
        tensor([[ 0.0000,  1.0000,  0.0000,  0.0000],
                [-0.0938,  0.5938,  0.5938, -0.0938]])
    """
    a = CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return torch.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], -1)


def bicubic_matrix(in_size, out_size, x):
    """The (out_size, in_size) matrix of PyTorch's bicubic interpolation
    along one axis (``align_corners=False``, taps beyond the edges clamped
    to them), in the dtype and on the device of ``x``, built from the sizes
    inside the graph.

    Examples:
        >>> m = bicubic_matrix(4, 6, torch.zeros(1))
        >>> m.shape, torch.allclose(m.sum(1), torch.ones(6))
        (torch.Size([6, 4]), True)
    """
    position = torch.arange(out_size, device=x.device, dtype=x.dtype)
    source = (position + 0.5) * (in_size / out_size) - 0.5
    first = source.floor()
    weights = cubic_weights(source - first)
    taps = (first[:, None] + torch.arange(-1, 3, device=x.device)).clamp(
        0, in_size - 1)
    columns = torch.arange(in_size, device=x.device, dtype=x.dtype)
    one_hot = (taps[..., None] == columns).to(x.dtype)
    return (weights[..., None] * one_hot).sum(1)


def separable_interpolate(input,
                          size=None,
                          scale_factor=None,
                          mode='nearest',
                          align_corners=None,
                          recompute_scale_factor=None,
                          antialias=False):
    """``torch.nn.functional.interpolate``, with bicubic resizing of a map
    (N, C, H, W) to a ``size`` (``align_corners=False``, no antialias)
    computed as two matrix products (``rows @ input @ cols^T``, see
    :func:`bicubic_matrix`); everything else as
    :data:`PLAIN_INTERPOLATE`.

    Bicubic interpolation is separable, so the result is the same. ONNX
    Runtime's cubic ``Resize`` runs per channel: PyramidTNT's attention bias
    (4200 channels of 32x32 in a Mask R-CNN at 800x1333) took 4.8 s there,
    the products a few milliseconds.

    Examples:
        >>> x = torch.rand(1, 3, 8, 8)
        >>> out = separable_interpolate(x, size=(5, 12), mode='bicubic',
        ...                             align_corners=False)
        >>> torch.allclose(out, PLAIN_INTERPOLATE(
        ...     x, size=(5, 12), mode='bicubic', align_corners=False),
        ...     atol=1e-6)
        True
    """
    if (mode != 'bicubic' or align_corners or antialias or size is None
            or input.dim() != 4):
        return PLAIN_INTERPOLATE(input, size, scale_factor, mode,
                                 align_corners, recompute_scale_factor,
                                 antialias)
    out_h, out_w = (size, size) if isinstance(size, int) else size
    height, width = input.shape[-2:]
    rows = bicubic_matrix(height, out_h, input)
    cols = bicubic_matrix(width, out_w, input)
    return rows @ input @ cols.transpose(0, 1)


def graph_interpolation():
    """A context in which ``torch.nn.functional.interpolate`` is
    :func:`separable_interpolate` (mmtnt's models resize their learned
    position embeddings and PyramidTNT's attention bias bicubically to the
    input's token grids); afterwards as before.

    Examples:
        >>> with graph_interpolation():
        ...     F.interpolate is separable_interpolate
        True
    """
    return mock.patch.object(F, 'interpolate', separable_interpolate)


#: mmtnt's attention function, which :func:`graph_attention` replaces for
#: a while.
PLAIN_ATTENTION = attention_layers.scaled_dot_product_attention


def graph_attention(cut_queries=True):
    """A context in which the attention layers of mmtnt
    (:mod:`mmtnt.models.layers.attention`) compute their attention as
    exported graphs do, afterwards as before: the explicit products
    (:data:`~mmtnt.deploy.chunked_attention.EXPLICIT_ATTENTION`), with the
    queries in parts
    (:func:`~mmtnt.deploy.chunked_attention.query_chunked_attention`) if
    ``cut_queries``.

    The explicit products, not PyTorch's fused attention, because of what
    the ONNX exporter makes of the latter: it decomposes it into the same
    ``MatMul``, ``Softmax``, ``MatMul``, but transposes the keys by
    reshaping them to 3-D, transposing and reshaping back, which ONNX
    Runtime cannot fold into the product. For TNT's word attention
    (6272 x 16 x 6 keys per block at batch 8), each such ``Transpose``
    took 9 ms, a third of the graph's time; the explicit ``key^T`` of the
    last two axes is one ``Transpose`` that ONNX Runtime merges with the
    heads' (docs/inference.md, "Attention in exported graphs").

    Args:
        cut_queries (bool): Whether attention over a whole token map is
            computed in parts. Defaults to True.

    Examples:
        >>> from mmtnt.models.layers import MultiheadAttention
        >>> layer, x = MultiheadAttention(16, 2).eval(), torch.rand(1, 9, 16)
        >>> with graph_attention():
        ...     exported = layer(x)
        >>> torch.allclose(exported, layer(x), atol=1e-6)
        True
    """
    return mock.patch.object(
        attention_layers, 'scaled_dot_product_attention',
        chunked_attention.query_chunked_attention
        if cut_queries else chunked_attention.EXPLICIT_ATTENTION)


@contextlib.contextmanager
def export_friendly(module):
    """Within the block, the adaptive average poolings of ``module`` that
    do not pool to 1x1 are :class:`AdaptiveAvgPool2dGraph`, bicubic
    interpolation is two matrix products (:func:`graph_interpolation`), and
    mmtnt's attention layers compute explicit products
    (:func:`graph_attention`), with their queries in parts unless
    ``module`` is a :class:`ClassifierGraph`; all is put back afterwards.

    Segmentors and detectors run at 512 to 1333 pixels a side, where the
    attention over a whole token map has millions of weights per head, and
    the parts keep the graph's memory near the eager model's. Classifiers
    run at 224 or 256 (their configs), where it has fewer than
    :data:`~mmtnt.deploy.chunked_attention.MIN_CHUNKED_WEIGHTS` (Twins'
    first stage at 224: 3136 x 49), and the parts would only add copies of
    the queries and outputs (see docs/inference.md, "Mask R-CNN at
    800x1333").

    Args:
        module (nn.Module): Changed in place for the block.

    Examples:
        >>> module = nn.Sequential(nn.AdaptiveAvgPool2d(3))
        >>> with export_friendly(module):
        ...     type(module[0]).__name__
        'AdaptiveAvgPool2dGraph'
        >>> type(module[0]).__name__
        'AdaptiveAvgPool2d'
    """
    swapped = []
    for parent in module.modules():
        for name, child in parent.named_children():
            if (isinstance(child, nn.AdaptiveAvgPool2d)
                    and child.output_size not in (1, (1, 1))):
                swapped.append((parent, name, child))
                setattr(parent, name,
                        AdaptiveAvgPool2dGraph(child.output_size))
    try:
        with graph_interpolation(), graph_attention(
                cut_queries=not isinstance(module, ClassifierGraph)):
            yield module
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)
