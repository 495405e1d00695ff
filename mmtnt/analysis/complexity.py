"""The report of ``tools/analysis_tools/get_flops.py``: the parameters and
MACs of a config's model by part (:mod:`mmtnt.analysis.flops` counts
them), and the table of the 12 ImageNet classifiers next to the papers'
figures (``--table``), which ``--write-doc`` puts into
docs/model_complexity.md between :data:`TABLE_BEGIN` and :data:`TABLE_END`.

Examples:
    >>> from mmtnt.analysis.complexity import main
    >>> main(['configs/tnt/tnt-s-p16_16xb64_in1k.py'])  # doctest: +SKIP
    config: configs/tnt/tnt-s-p16_16xb64_in1k.py
    ...
"""
import argparse
import os.path as osp
import re
from collections import Counter

import torch
from mmengine.config import DictAction

from .flops import REST, TASK_NAMES, analyze, load_config, package_config

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
TABLE_BEGIN = '<!-- get_flops.py --table: begin -->'
TABLE_END = '<!-- get_flops.py --table: end -->'


def human(number):
    """``number`` with 3 significant digits and a K, M or G suffix.

    Examples:
        >>> human(23_768_000), human(512)
        ('23.8M', '512')
    """
    for scale, suffix in ((1e9, 'G'), (1e6, 'M'), (1e3, 'K')):
        if abs(number) >= scale:
            return f'{number / scale:.3g}{suffix}'
    return str(number)


def format_skipped(skipped):
    """The uncounted operators, most frequent first.

    Examples:
        >>> format_skipped(Counter({'aten::add': 62, 'aten::gelu': 12}))
        'aten::add x62, aten::gelu x12'
    """
    if not skipped:
        return 'none'
    return ', '.join(f'{op} x{n}' for op, n in Counter(skipped).most_common())


def report(path, cfg, result):
    """The printed report of one config.

    Args:
        path (str): The config file.
        cfg (Config): The config.
        result (dict): What :func:`mmtnt.analysis.flops.analyze` returned.

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
    """Signed difference of ``value`` to ``reference`` in percent.

    Examples:
        >>> percent(23.77, 23.8), percent(16.0, 16.0)
        ('-0.1%', '0.0%')
    """
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
        cfg = load_config(package_config(config))
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


def complexity_table(rows):
    """The rows of :func:`table_rows` as a Markdown table.

    Args:
        rows (list[dict]): From :func:`table_rows`.

    Returns:
        str: The table of docs/model_complexity.md.
    """
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
    of ``path`` with ``table``.

    Args:
        path (str): The Markdown file.
        table (str): What goes between the two lines.

    Raises:
        SystemExit: If the file has no such block.

    Examples:
        >>> write_doc('docs/model_complexity.md',
        ...           complexity_table(table_rows()))  # doctest: +SKIP
    """
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
    positive integers.

    Examples:
        >>> parse_shape(argparse.ArgumentParser(), [512])
        (512, 512)
    """
    if shape is None:
        return None
    if len(shape) not in (1, 2) or min(shape) < 1:
        parser.error(f'--shape takes H or H W, positive integers; got '
                     f'{" ".join(map(str, shape))}')
    return (shape[0], shape[-1])


def parse_args(argv=None):
    """The options of ``get_flops.py``.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Returns:
        argparse.Namespace: ``shape`` as (H, W) or None.
    """
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
    return args


def main(argv=None):
    """``get_flops.py``: print the report of a config, or the papers'
    table.

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Examples:
        >>> main(['configs/tnt/tnt-s-p16_16xb64_in1k.py', '--shape', '384'])
        ... # doctest: +SKIP
    """
    args = parse_args(argv)
    torch.manual_seed(0)
    if args.table:
        table = complexity_table(table_rows())
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
