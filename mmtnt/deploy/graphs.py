"""What is exported of each model (:func:`export_graph`): classifiers give
class scores or logits (:class:`ClassifierGraph`), segmentors logits at the
input resolution (:class:`SegmentorGraph`), detectors one image's
post-processed detections (:class:`mmtnt.deploy.DetectorGraph`).

The input is the image as the data preprocessor normalises it
(:func:`describe_preprocessing`); :func:`export_friendly` and
:data:`EXPORT_DECOMPOSITIONS` set the forms ONNX Runtime runs better.
"""
import contextlib

import torch
import torch.nn as nn

from ..models import set_attention_impl, set_resize_impl
from .detection import DetectorGraph


class ClassifierGraph(nn.Module):
    """What is exported of an image classifier: images -> class scores.

    Args:
        classifier (nn.Module): An mmpretrain ``ImageClassifier`` with a
            head.
        logits (bool): Return the head's logits instead of the scores.
            Defaults to False.

    Examples:
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
    input resolution (``encode_decode``).

    Args:
        segmentor (nn.Module): An mmseg ``EncoderDecoder``.

    Examples:
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
        # A torch.Size img_shape keeps its sizes symbolic under export.
        img_metas = [dict(img_shape=inputs.shape[2:])]
        return self.segmentor.encode_decode(inputs, img_metas)


#: The graph classes, by the attribute that holds the wrapped model.
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
        mask_output (str): Mask R-CNN: ``'roi'`` (per-RoI ``roi_masks``,
            for :func:`mmtnt.deploy.paste_masks`) or ``'image'`` (pasted in
            the graph). Defaults to ``'roi'``.

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
    """The model a graph wraps; None for any other module."""
    for name, graph_class in GRAPHS.items():
        if isinstance(graph, graph_class):
            return getattr(graph, name)
    return None


def output_names(graph):
    """The output names of a graph (any other module: ``['output']``)."""
    if isinstance(graph, DetectorGraph):
        return list(graph.output_names)
    return [getattr(graph, 'output_name', 'output')]


def input_channels(model):
    """The image channels a model or graph takes: its preprocessor's, else
    3."""
    if is_graph(model):
        model = wrapped_model(model)
    preprocessor = getattr(model, 'data_preprocessor', None)
    mean = getattr(preprocessor, 'mean', None)
    return 3 if mean is None else int(mean.shape[0])


def channels_reversed(preprocessor):
    """Whether a data preprocessor reverses the channels (BGR to RGB)."""
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


def averaging_matrix(in_size, out_size, x):
    """The (out_size, in_size) weights of PyTorch's adaptive average pooling
    along one axis, in the dtype and on the device of ``x``."""
    i = torch.arange(out_size, device=x.device)
    start = torch.div(i * in_size, out_size, rounding_mode='floor')
    end = torch.div((i + 1) * in_size + out_size - 1, out_size,
                    rounding_mode='floor')
    j = torch.arange(in_size, device=x.device)
    inside = (j[None] >= start[:, None]) & (j[None] < end[:, None])
    return inside.to(x.dtype) / (end - start)[:, None].to(x.dtype)


def adaptive_avg_pool2d_by_products(x, output_size):
    """``aten.adaptive_avg_pool2d`` as two products with
    :func:`averaging_matrix`, built from the input's size in the graph
    (PyTorch's own decomposition fixes the example's windows);
    ``NotImplemented`` (the operator as it is) for 1x1.

    Examples:
        >>> x = torch.rand(2, 4, 13, 7)
        >>> torch.allclose(adaptive_avg_pool2d_by_products(x, (3, 2)),
        ...                nn.AdaptiveAvgPool2d((3, 2))(x))
        True
    """
    out_h, out_w = output_size
    if (out_h, out_w) == (1, 1):
        return NotImplemented
    rows = averaging_matrix(x.shape[-2], out_h, x)
    cols = averaging_matrix(x.shape[-1], out_w, x)
    return rows @ x @ cols.transpose(0, 1)


#: The decompositions :func:`mmtnt.deploy.export_onnx` applies.
EXPORT_DECOMPOSITIONS = {
    torch.ops.aten.adaptive_avg_pool2d.default:
    adaptive_avg_pool2d_by_products
}


def decompose_for_export(program):
    """``program`` with :data:`EXPORT_DECOMPOSITIONS` applied; itself
    where it has none of their operators (decomposing may reorder it)."""
    if not any(node.target in EXPORT_DECOMPOSITIONS
               for node in program.graph.nodes):
        return program
    return program.run_decompositions(EXPORT_DECOMPOSITIONS)


#: The settings of mmtnt's modules that :func:`export_friendly` changes.
EXPORT_SETTINGS = ('attn_impl', 'resize_impl')


@contextlib.contextmanager
def export_friendly(module):
    """Within the block, ``module`` computes as its exported graph should:
    ``attn_impl`` ``'explicit'`` for a :class:`ClassifierGraph`, else
    ``'parts'``, and ``resize_impl='matrices'`` (forms ONNX Runtime runs
    faster). The settings are put back afterwards.

    Args:
        module (nn.Module): Changed in place for the block.

    Examples:
        >>> from mmtnt.models.layers import MultiheadAttention
        >>> module = nn.Sequential(MultiheadAttention(16, 2))
        >>> with export_friendly(module):
        ...     module[0].attn_impl
        'parts'
        >>> module[0].attn_impl
        'auto'
    """
    saved = [(child, name, child.__dict__.get(name))
             for child in module.modules() for name in EXPORT_SETTINGS
             if hasattr(child, name)]
    set_attention_impl(
        module,
        'explicit' if isinstance(module, ClassifierGraph) else 'parts')
    set_resize_impl(module, 'matrices')
    try:
        yield module
    finally:
        for child, name, value in saved:
            if value is None:  # the class's default
                delattr(child, name)
            else:
                setattr(child, name, value)
