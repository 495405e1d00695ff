"""Count the parameters and FLOPs (MACs) of the model of any config.

The config's ``default_scope`` decides the task and the model's forward:

- ``mmpretrain``: the whole classifier (backbone, neck, head), called in
  ``'tensor'`` mode (it returns the logits), on the test pipeline's crop
  (224, 256 for PyramidTNT-S/M/B, 192 for PyramidTNT-Ti);
- ``mmdet``: the detector's ``'tensor'`` forward (backbone, neck, heads
  without post-processing, but with the RPN's proposals for two-stage
  detectors) on an 800x1280 (H x W) input, the "1280x800" of mmdet's
  FLOPs figures;
- ``mmseg``: the segmentor's ``'tensor'`` forward (backbone, neck, decode
  head; the auxiliary head, used in training only, is dropped) on a 512x512
  input, the ADE20K crop.

Detection and segmentation inputs are padded to the data preprocessor's
size divisor, as in testing.

The counter is mmengine's :class:`~mmengine.analysis.FlopAnalyzer`: it
traces the forward with ``torch.jit`` and counts the recorded operators
with fvcore's rules, one fused multiply-add as one FLOP, so its "FLOPs"
are MACs, the unit of the TNT, PyramidTNT and Twins papers' figures. It
has no rule for ``aten::scaled_dot_product_attention`` (all mmtnt
attention runs through it): :func:`flop_analyzer` adds one (``q @ k^T``
and ``attn @ v``), so the attention matmuls are counted. Element-wise
operators (additions, activations, softmax, pooling) are not counted.

Examples:
    >>> from mmtnt.analysis.flops import analyze, load_config
    >>> result = analyze(load_config('configs/tnt/tnt-s-p16_16xb64_in1k.py'))
    >>> result['shape'], round(result['macs'] / 1e9, 1)
    ((224, 224), 5.2)
"""
import math
import os.path as osp

import torch
import torch.nn as nn
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm

from mmtnt.hub import index_file

TASK_NAMES = dict(
    mmpretrain='classification', mmdet='detection', mmseg='segmentation')
# Default inputs (H, W) of the dense tasks, and where they come from.
DEFAULT_SHAPES = dict(
    mmdet=((800, 1280), 'the 1280x800 of mmdet\'s FLOPs figures'),
    mmseg=((512, 512), 'the ADE20K crop'))
# The operator whose MACs are the attention products: every attention of
# mmtnt's three families calls F.scaled_dot_product_attention
# (mmtnt.models.layers.attention); none multiplies q and k explicitly.
ATTENTION_OP = 'scaled_dot_product_attention'
# The row of the parts table for operators outside every part: the trace
# scopes an operator by the innermost module whose __call__ runs it, so the
# operators of a method called directly (mmseg calls
# ``decode_head.forward(x)``, whose own resizing then counts for the
# segmentor) fall on the model itself.
REST = '(model itself)'


def sdpa_flop_jit(inputs, outputs):
    """MACs of ``aten::scaled_dot_product_attention``: ``q @ k^T`` and
    ``attn @ v``, each ``batch * heads * Nq * Nk * d``.

    The scaling, the mask and the softmax are element-wise and, as for
    every element-wise operator of the counter, not counted.

    Args:
        inputs (list[torch._C.Value]): The traced inputs: query
            (..., Nq, d_qk), key (..., Nk, d_qk), value (..., Nk, d_v), ...
        outputs (list[torch._C.Value]): The traced output (..., Nq, d_v).

    Returns:
        int: The MACs of the two products.
    """
    query, key, value = (get_shape(v) for v in inputs[:3])
    out = get_shape(outputs[0])
    # The output's leading dims are the broadcast batch and head dims.
    rows = math.prod(out[:-1])
    return rows * key[-2] * (query[-1] + value[-1])


def flop_analyzer(model, inputs):
    """mmengine's FlopAnalyzer with the attention handle, quiet.

    Args:
        model (nn.Module): The module to trace.
        inputs (tuple[Tensor]): Its inputs.

    Returns:
        FlopAnalyzer: Not run yet (it traces on the first query).

    Examples:
        >>> analyzer = flop_analyzer(nn.Linear(8, 4), (torch.rand(2, 8), ))
        >>> analyzer.total()
        64
    """
    analyzer = FlopAnalyzer(model, inputs)
    analyzer.set_op_handle(
        'aten::scaled_dot_product_attention', sdpa_flop_jit)
    return analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(
        False)


def forward_macs(model, images):
    """Multiply-adds of one forward pass (attention products included).

    Args:
        model (nn.Module): Taking ``images``; it is put in eval mode.
        images (Tensor): Its input.

    Returns:
        int: The MACs.

    Examples:
        >>> forward_macs(nn.Linear(8, 4), torch.rand(1, 8))
        32
    """
    analyzer = flop_analyzer(model.eval(), (images, ))
    with torch.no_grad():
        return analyzer.total()


class TensorForward(nn.Module):
    """Call an OpenMMLab model in ``'tensor'`` mode with fixed data
    samples, so that it takes one tensor as a traced module must.

    Args:
        model (BaseModel): The model.
        data_samples (list, optional): Passed with every call.
    """

    def __init__(self, model, data_samples=None):
        super().__init__()
        self.model = model
        self.data_samples = data_samples

    def forward(self, inputs):
        return self.model(inputs, self.data_samples, mode='tensor')


def package_config(path):
    """The file of one of mmtnt's configs.

    Args:
        path (str): Relative to the repository, e.g.
            ``'configs/tnt/tnt-s-p16_16xb64_in1k.py'``.

    Returns:
        str: The file in the source tree, or in an installed package's
        ``.mim`` folder (where its model index lies,
        :func:`mmtnt.hub.index_file`).

    Examples:
        >>> package_config('configs/tnt/tnt-s-p16_16xb64_in1k.py')
        ... # doctest: +SKIP
        '/src/mmtnt/configs/tnt/tnt-s-p16_16xb64_in1k.py'
    """
    return osp.join(osp.dirname(index_file()), path)


def load_config(path, cfg_options=None):
    """Read a config and check that its task is known.

    Args:
        path (str): The config file.
        cfg_options (dict, optional): Settings merged into it.

    Returns:
        Config: The config.

    Raises:
        SystemExit: With one line, if the file is missing or its
            ``default_scope`` is none of :data:`TASK_NAMES`.

    Examples:
        >>> load_config('configs/tnt/tnt-s-p16_16xb64_in1k.py').default_scope
        'mmpretrain'
    """
    if not osp.isfile(path):
        raise SystemExit(f'get_flops.py: config file not found: {path}')
    cfg = Config.fromfile(path)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    scope = cfg.get('default_scope')
    if scope not in TASK_NAMES:
        raise SystemExit(f'get_flops.py: default_scope of {path} must be one '
                         f'of {sorted(TASK_NAMES)}, got {scope!r}.')
    return cfg


def build_eval_model(cfg):
    """The config's model, on the CPU, in eval mode, inference heads only.

    Args:
        cfg (Config): The full config.

    Returns:
        nn.Module: The model, built by :func:`mmtnt.apis.init_model` under
        the config's ``default_scope`` (none is left behind), SyncBN layers
        replaced by BatchNorm and mmseg's auxiliary head dropped.

    Examples:
        >>> model = build_eval_model(
        ...     load_config('configs/tnt/tnt-s-p16_16xb64_in1k.py'))
        >>> model.training
        False
    """
    from mmtnt.apis import init_model
    model = revert_sync_batchnorm(init_model(cfg))
    if getattr(model, 'auxiliary_head', None) is not None:
        # mmseg's auxiliary head runs in training only.
        model.auxiliary_head = None
    model.eval()  # some train() overrides do not return the module
    return model


def pipeline_crop(cfg):
    """The square side a classification config's test pipeline crops to.

    Args:
        cfg (Config): The full config.

    Returns:
        int | None: The last ``crop_size`` (or ``scale`` of a resize) of the
        test (else val) pipeline; None if there is none.

    Examples:
        >>> pipeline_crop(load_config(
        ...     'configs/pyramid_tnt/pyramid-tnt-ti_8xb128_in1k-192px.py'))
        192
    """
    for loader in ('test_dataloader', 'val_dataloader'):
        dataset = cfg.get(loader, {}).get('dataset', {})
        while 'dataset' in dataset:
            dataset = dataset['dataset']
        for transform in reversed(dataset.get('pipeline', [])):
            size = transform.get('crop_size', transform.get('scale'))
            if isinstance(size, int):
                return size
            if isinstance(size, (tuple, list)) and len(set(size)) == 1:
                return size[0]
    return None


def default_shape(cfg):
    """The default input (H, W) of a config, and where it comes from.

    Args:
        cfg (Config): The full config.

    Returns:
        tuple[tuple[int, int], str]: The shape and its source.

    Examples:
        >>> default_shape(load_config('configs/tnt/tnt-s-p16_16xb64_in1k.py'))
        ((224, 224), "the test pipeline's crop")
    """
    scope = cfg.default_scope
    if scope in DEFAULT_SHAPES:
        return DEFAULT_SHAPES[scope]
    side = pipeline_crop(cfg)
    if side is not None:
        return (side, side), 'the test pipeline\'s crop'
    side = cfg.model.get('backbone', {}).get('img_size')
    if isinstance(side, int):
        return (side, side), 'the backbone\'s img_size'
    return (224, 224), 'the ImageNet default'


def size_divisor(cfg):
    """The divisor the data preprocessor pads test images to (1 if none).

    Args:
        cfg (Config): The full config.

    Returns:
        int: ``pad_size_divisor`` (mmdet, mmpretrain) or ``size_divisor``
        (mmseg, also under the preprocessor's ``test_cfg``).

    Examples:
        >>> size_divisor(load_config(
        ...     'configs/twins/mask-rcnn_twins-svt-s_fpn_1x_coco.py'))
        32
    """
    pre = cfg.model.get('data_preprocessor') or cfg.get(
        'data_preprocessor') or {}
    for value in (pre.get('pad_size_divisor'), pre.get('size_divisor'),
                  (pre.get('test_cfg') or {}).get('size_divisor')):
        if value:
            return int(value)
    return 1


def data_samples(scope, shape, padded):
    """Data samples of one image for the models' ``'tensor'`` forward.

    Args:
        scope (str): The config's ``default_scope``.
        shape (tuple[int, int]): The image (H, W).
        padded (tuple[int, int]): The batch (H, W) after padding.

    Returns:
        list | None: One sample for detection and segmentation, else None.

    Examples:
        >>> data_samples('mmdet', (100, 150), (128, 160))[0].pad_shape
        (128, 160)
    """
    if scope == 'mmdet':
        from mmdet.structures import DetDataSample
        return [
            DetDataSample(
                metainfo=dict(
                    img_shape=shape,
                    ori_shape=shape,
                    pad_shape=padded,
                    batch_input_shape=padded,
                    scale_factor=(1., 1.)))
        ]
    if scope == 'mmseg':
        from mmseg.structures import SegDataSample
        return [
            SegDataSample(
                metainfo=dict(
                    img_shape=shape, ori_shape=shape, pad_shape=padded))
        ]
    return None


def model_parts(model, analyzer, params):
    """Params and MACs of each top-level part of the model.

    Args:
        model (nn.Module): The model (not the wrapper).
        analyzer (FlopAnalyzer): The analysis of ``TensorForward(model)``.
        params (dict): ``parameter_count(model)``.

    Returns:
        list[tuple[str, int, int]]: (name, params, MACs) of each child
        module with parameters or MACs, then :data:`REST` with what the
        trace puts on the model itself, if anything.
    """
    by_module = analyzer.by_module()
    parts = []
    for name, _ in model.named_children():
        macs = by_module.get(f'model.{name}', 0)
        if params.get(name, 0) or macs:
            parts.append((name, params.get(name, 0), macs))
    rest = (params[''] - sum(p for _, p, _ in parts),
            analyzer.total() - sum(m for _, _, m in parts))
    if any(rest):
        parts.append((REST, *rest))
    return parts


def analyze(cfg, shape=None):
    """Count the params and MACs of a config's model.

    Args:
        cfg (Config): The full config.
        shape (tuple[int, int], optional): Input (H, W); the config's
            default if None.

    Returns:
        dict: ``params``, ``macs``, ``attention_macs``, ``skipped`` (a
        Counter of the uncounted operators), ``parts`` (see
        :func:`model_parts`), ``shape``, ``padded``, ``shape_source`` and
        ``analyzer`` (for per-module tables).

    Examples:
        >>> result = analyze(load_config(
        ...     'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
        ...     ), (64, 64))
        >>> [name for name, _, _ in result['parts']]
        ['backbone', 'decode_head', '(model itself)']
    """
    source = 'given by --shape'
    if shape is None:
        shape, source = default_shape(cfg)
    divisor = size_divisor(cfg)
    padded = tuple(-(-side // divisor) * divisor for side in shape)
    model = build_eval_model(cfg)
    wrapper = TensorForward(
        model, data_samples(cfg.default_scope, tuple(shape), padded))
    analyzer = flop_analyzer(wrapper, (torch.rand(1, 3, *padded), ))
    with torch.no_grad():
        by_operator = analyzer.by_operator()
    params = parameter_count(model)
    return dict(
        params=params[''],
        macs=analyzer.total(),
        attention_macs=by_operator.get(ATTENTION_OP, 0),
        skipped=analyzer.unsupported_ops(),
        parts=model_parts(model, analyzer, params),
        shape=tuple(shape),
        padded=padded,
        shape_source=source,
        analyzer=analyzer)
