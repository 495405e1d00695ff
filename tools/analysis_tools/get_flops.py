"""Count the parameters and FLOPs of the model of any config of the repo.

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

``--shape H [W]`` overrides the input size; detection and segmentation
inputs are padded to the data preprocessor's size divisor, as in testing.

The counter is mmengine's :class:`~mmengine.analysis.FlopAnalyzer`: it
traces the forward with ``torch.jit`` and counts the recorded operators
with fvcore's rules, one fused multiply-add as one FLOP, so its "FLOPs"
are MACs, the unit of the TNT, PyramidTNT and Twins papers' figures. It
has no rule for ``aten::scaled_dot_product_attention`` (all mmtnt
attention runs through it): this tool adds one (``q @ k^T`` and
``attn @ v``), so the attention matmuls are counted. Element-wise
operators (additions, activations, softmax, pooling) are not counted: the
output lists them as skipped ops.

Examples:
    python tools/analysis_tools/get_flops.py \\
        configs/tnt/tnt-s-p16_16xb64_in1k.py
    python tools/analysis_tools/get_flops.py \\
        configs/twins/upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py \\
        --shape 512 1024
    python tools/analysis_tools/get_flops.py \\
        configs/pyramid_tnt/pyramid-tnt-s_8xb128_in1k-256px.py --per-module 3
    python tools/analysis_tools/get_flops.py --table
    python tools/analysis_tools/get_flops.py --table \\
        --write-doc docs/model_complexity.md

``--table`` counts the 12 ImageNet classifiers of :data:`PAPER_NUMBERS` at
their published input sizes and prints a Markdown table next to the
papers' figures; ``--write-doc`` puts it into a file, between the lines
:data:`TABLE_BEGIN` and :data:`TABLE_END`.
"""
import argparse
import copy
import math
import os.path as osp
import re
from collections import Counter

import torch
import torch.nn as nn
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape
from mmengine.config import Config, DictAction
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import MODELS, init_default_scope

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
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
COUNTER = ('mmengine.analysis.FlopAnalyzer (torch.jit trace, fvcore rules; '
           '1 fused multiply-add = 1 FLOP, so the FLOPs are MACs)')
SDPA_NOTE = ('attention matmuls: counted; aten::scaled_dot_product_attention '
             'has no mmengine rule, a handle adds q@k^T + attn@v = '
             'batch*heads*Nq*Nk*(d_qk + d_v) MACs')

# The published ImageNet-1k figures: config, input side, params (M), MACs
# (G); from the papers: TNT arXiv 2103.00112, PyramidTNT arXiv 2201.00978,
# Twins arXiv 2104.13840.
PAPER_NUMBERS = {
    'TNT-S': ('configs/tnt/tnt-s-p16_16xb64_in1k.py', 224, 23.8, 5.2),
    'TNT-B': ('configs/tnt/tnt-b-p16_16xb64_in1k.py', 224, 65.6, 14.1),
    'PyramidTNT-Ti':
    ('configs/pyramid_tnt/pyramid-tnt-ti_8xb128_in1k-192px.py', 192, 10.6,
     0.6),
    'PyramidTNT-S':
    ('configs/pyramid_tnt/pyramid-tnt-s_8xb128_in1k-256px.py', 256, 32.0,
     3.3),
    'PyramidTNT-M':
    ('configs/pyramid_tnt/pyramid-tnt-m_8xb128_in1k-256px.py', 256, 85.0,
     8.2),
    'PyramidTNT-B':
    ('configs/pyramid_tnt/pyramid-tnt-b_8xb128_in1k-256px.py', 256, 157.0,
     16.0),
    'PCPVT-S': ('configs/twins/twins-pcpvt-small_8xb128_in1k.py', 224, 24.1,
                3.8),
    'PCPVT-B': ('configs/twins/twins-pcpvt-base_8xb128_in1k.py', 224, 43.8,
                6.7),
    'PCPVT-L': ('configs/twins/twins-pcpvt-large_16xb64_in1k.py', 224, 60.9,
                9.8),
    'SVT-S': ('configs/twins/twins-svt-small_8xb128_in1k.py', 224, 24.0, 2.9),
    'SVT-B': ('configs/twins/twins-svt-base_8xb128_in1k.py', 224, 56.1, 8.6),
    'SVT-L': ('configs/twins/twins-svt-large_16xb64_in1k.py', 224, 99.2,
              15.1),
}
# The row of the parts table for operators outside every part: the trace
# scopes an operator by the innermost module whose __call__ runs it, so the
# operators of a method called directly (mmseg calls
# ``decode_head.forward(x)``, whose own resizing then counts for the
# segmentor) fall on the model itself.
REST = '(model itself)'
TABLE_BEGIN = '<!-- get_flops.py --table: begin -->'
TABLE_END = '<!-- get_flops.py --table: end -->'


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
    """
    analyzer = FlopAnalyzer(model, inputs)
    analyzer.set_op_handle(
        'aten::scaled_dot_product_attention', sdpa_flop_jit)
    return analyzer.unsupported_ops_warnings(False).uncalled_modules_warnings(
        False)


class TensorForward(nn.Module):
    """Call an OpenMMLab model in ``'tensor'`` mode with fixed data
    samples, so that it takes one tensor as a traced module must."""

    def __init__(self, model, data_samples=None):
        super().__init__()
        self.model = model
        self.data_samples = data_samples

    def forward(self, inputs):
        return self.model(inputs, self.data_samples, mode='tensor')


def load_config(path, cfg_options=None):
    """Read a config and check that its task is known.

    Args:
        path (str): The config file.
        cfg_options (dict, optional): Settings merged into it.

    Returns:
        Config: The config.
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


def build_model(cfg):
    """The config's model, on the CPU, in eval mode, inference heads only.

    Args:
        cfg (Config): The full config.

    Returns:
        nn.Module: The model, built through the registry of the config's
        ``default_scope``.
    """
    init_default_scope(cfg.default_scope)
    model = revert_sync_batchnorm(MODELS.build(copy.deepcopy(cfg.model)))
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
    """
    source = 'given by --shape'
    if shape is None:
        shape, source = default_shape(cfg)
    divisor = size_divisor(cfg)
    padded = tuple(-(-side // divisor) * divisor for side in shape)
    model = build_model(cfg)
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


def human(number):
    """``number`` with 3 significant digits and a K, M or G suffix."""
    for scale, suffix in ((1e9, 'G'), (1e6, 'M'), (1e3, 'K')):
        if abs(number) >= scale:
            return f'{number / scale:.3g}{suffix}'
    return str(number)


def format_skipped(skipped):
    """``'aten::add x62, ...'``, most frequent first."""
    if not skipped:
        return 'none'
    return ', '.join(f'{op} x{n}' for op, n in Counter(skipped).most_common())


def report(path, cfg, result):
    """The printed report of one config.

    Args:
        path (str): The config file.
        cfg (Config): The config.
        result (dict): What :func:`analyze` returned.

    Returns:
        str: The report.
    """
    H, W = result['shape']
    padded = result['padded']
    input_line = f'1x3x{H}x{W} ({result["shape_source"]})'
    if padded != result['shape']:
        input_line += f', padded to {padded[0]}x{padded[1]}'
    lines = [
        f'config: {path}',
        f'task: {TASK_NAMES[cfg.default_scope]} ({cfg.default_scope} '
        f'{cfg.model.type}, forward in \'tensor\' mode)',
        f'input: {input_line}',
        f'counter: {COUNTER}',
        f'{SDPA_NOTE} ({human(result["attention_macs"])} of the total)',
        'skipped ops (not counted): ' + format_skipped(result['skipped']),
        f'params: {result["params"]:,} ({human(result["params"])})',
        f'MACs: {result["macs"]:,} ({human(result["macs"])})',
        '',
        f'{"part":<20}{"params":>12}{"MACs":>12}',
    ]
    for name, params, macs in result['parts']:
        lines.append(f'{name:<20}{human(params):>12}{human(macs):>12}')
    if result['parts'] and result['parts'][-1][0] == REST:
        lines.append(f'{REST}: operators run by the model\'s own code or '
                     'by methods of its parts called without __call__ '
                     '(e.g. a head\'s resizing in head.forward)')
    return '\n'.join(lines)


def percent(value, reference):
    """Signed difference of ``value`` to ``reference`` in percent."""
    text = f'{100 * (value - reference) / reference:+.1f}%'
    return '0.0%' if text in ('+0.0%', '-0.0%') else text


def table_rows():
    """Count the 12 classifiers of :data:`PAPER_NUMBERS` at their published
    input sizes.

    Returns:
        list[dict]: One row per model: ``name``, ``config``, ``side``, the
        paper's ``paper_params``/``paper_macs`` and :func:`analyze`'s
        ``params``, ``macs``, ``attention_macs``.
    """
    rows = []
    for name, (config, side, paper_params, paper_macs) in \
            PAPER_NUMBERS.items():
        cfg = load_config(osp.join(REPO, config))
        result = analyze(cfg, (side, side))
        rows.append(
            dict(
                name=name,
                config=config,
                side=side,
                paper_params=paper_params,
                paper_macs=paper_macs,
                params=result['params'],
                macs=result['macs'],
                attention_macs=result['attention_macs']))
    return rows


def format_table(rows):
    """The rows of :func:`table_rows` as a Markdown table."""
    lines = [
        '| model | config | input | params (M) | paper (M) | diff | '
        'MACs (G) | of which attention (G) | paper (G) | diff |',
        '|---|---|---|---|---|---|---|---|---|---|',
    ]
    for row in rows:
        params, macs = row['params'] / 1e6, row['macs'] / 1e9
        lines.append(
            f'| {row["name"]} | `{osp.basename(row["config"])}` | '
            f'{row["side"]} | {params:.2f} | {row["paper_params"]} | '
            f'{percent(params, row["paper_params"])} | {macs:.3f} | '
            f'{row["attention_macs"] / 1e9:.3f} | {row["paper_macs"]} | '
            f'{percent(macs, row["paper_macs"])} |')
    return '\n'.join(lines)


def write_doc(path, table):
    """Replace the text between :data:`TABLE_BEGIN` and :data:`TABLE_END`
    of ``path`` with ``table``."""
    with open(path) as f:
        text = f.read()
    pattern = re.escape(TABLE_BEGIN) + '.*?' + re.escape(TABLE_END)
    if not re.search(pattern, text, flags=re.S):
        raise SystemExit(f'get_flops.py: {path} has no {TABLE_BEGIN} ... '
                         f'{TABLE_END} block to replace.')
    block = f'{TABLE_BEGIN}\n{table}\n{TABLE_END}'
    with open(path, 'w') as f:
        f.write(re.sub(pattern, lambda _: block, text, flags=re.S))


def parse_shape(parser, shape):
    """``--shape H [W]`` as (H, W); a parser error if it is not one or two
    positive integers."""
    if shape is None:
        return None
    if len(shape) not in (1, 2) or min(shape) < 1:
        parser.error(f'--shape takes H or H W, positive integers; got '
                     f'{" ".join(map(str, shape))}')
    return (shape[0], shape[-1])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Print the params and FLOPs (MACs, attention included) '
        'of the model of a config.')
    parser.add_argument('config', nargs='?', help='config file')
    parser.add_argument(
        '--shape',
        type=int,
        nargs='+',
        metavar='SIDE',
        help='input H [W] (default: the test crop for classification, '
        '800 1280 for detection, 512 512 for segmentation)')
    parser.add_argument(
        '--per-module',
        type=int,
        metavar='DEPTH',
        help='also print mmengine\'s per-module table down to this depth')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, as key=value pairs')
    parser.add_argument(
        '--table',
        action='store_true',
        help='count the 12 ImageNet classifiers and print a Markdown table '
        'next to the papers\' figures')
    parser.add_argument(
        '--write-doc',
        metavar='FILE',
        help='with --table: put the table into FILE between its '
        f'"{TABLE_BEGIN}" and "{TABLE_END}" lines')
    args = parser.parse_args(argv)
    if args.write_doc and not args.table:
        parser.error('--write-doc needs --table')
    if not args.table and args.config is None:
        parser.error('a config file is required (or --table)')
    args.shape = parse_shape(parser, args.shape)
    return parser, args


def main(argv=None):
    parser, args = parse_args(argv)
    torch.manual_seed(0)
    if args.table:
        table = format_table(table_rows())
        print(f'counter: {COUNTER}\n{SDPA_NOTE}\n\n{table}')
        if args.write_doc:
            write_doc(args.write_doc, table)
        return
    cfg = load_config(args.config, args.cfg_options)
    result = analyze(cfg, args.shape)
    print(report(args.config, cfg, result))
    if args.per_module is not None:
        from mmengine.analysis.print_helper import complexity_stats_table
        print(
            complexity_stats_table(
                result['analyzer'],
                max_depth=args.per_module,
                show_param_shapes=False))


if __name__ == '__main__':
    main()
