"""The reports of ``get_flops.py``: a config's parameters and MACs by part,
and the ImageNet variants next to the papers' figures."""
import os.path as osp
import re
from collections import Counter

from .flops import REST, TASK_NAMES, analyze, imagenet_variants, load_config

COUNTER = ('mmengine.analysis.FlopAnalyzer (torch.jit trace, fvcore rules; '
           '1 fused multiply-add = 1 FLOP, so the FLOPs are MACs)')
SDPA_NOTE = ('attention matmuls: counted; aten::scaled_dot_product_attention '
             'has no mmengine rule, a handle adds q@k^T + attn@v = '
             'batch*heads*Nq*Nk*(d_qk + d_v) MACs')

# Params (M), MACs (G) of the papers: TNT arXiv 2103.00112, PyramidTNT
# arXiv 2201.00978, Twins arXiv 2104.13840.
PAPER_NUMBERS = {
    'tnt-s': (23.8, 5.2),
    'tnt-b': (65.6, 14.1),
    'pyramidtnt-ti': (10.6, 0.6),
    'pyramidtnt-s': (32.0, 3.3),
    'pyramidtnt-m': (85.0, 8.2),
    'pyramidtnt-b': (157.0, 16.0),
    'pcpvt-s': (24.1, 3.8),
    'pcpvt-b': (43.8, 6.7),
    'pcpvt-l': (60.9, 9.8),
    'svt-s': (24.0, 2.9),
    'svt-b': (56.1, 8.6),
    'svt-l': (99.2, 15.1),
}
TABLE_BEGIN = '<!-- get_flops.py --table: begin -->'
TABLE_END = '<!-- get_flops.py --table: end -->'
TABLE_HEADER = [
    'model', 'config', 'input', 'params (M)', 'paper (M)', 'diff',
    'MACs (G)', 'of which attention (G)', 'paper (G)', 'diff'
]


def human(number):
    """``number`` with 3 significant digits and a K, M or G suffix."""
    for scale, suffix in ((1e9, 'G'), (1e6, 'M'), (1e3, 'K')):
        if abs(number) >= scale:
            return f'{number / scale:.3g}{suffix}'
    return str(number)


def format_skipped(skipped):
    """The uncounted operators, most frequent first."""
    if not skipped:
        return 'none'
    return ', '.join(f'{op} x{n}' for op, n in Counter(skipped).most_common())


def report(path, cfg, result):
    """The printed report of ``path`` from :func:`analyze`'s ``result``."""
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
    """The cells of :data:`TABLE_HEADER` for each ImageNet variant, next
    to :data:`PAPER_NUMBERS`."""
    rows = []
    for name, variant in imagenet_variants().items():
        paper_params, paper_macs = PAPER_NUMBERS[name]
        side = variant['side']
        result = analyze(load_config(variant['config']), (side, side))
        params, macs = result['params'] / 1e6, result['macs'] / 1e9
        rows.append([
            variant['label'], f'`{osp.basename(variant["config"])}`',
            str(side), f'{params:.2f}', str(paper_params),
            percent(params, paper_params), f'{macs:.3f}',
            f'{result["attention_macs"] / 1e9:.3f}', str(paper_macs),
            percent(macs, paper_macs)
        ])
    return rows


def write_doc(path, table):
    """Replace the block between :data:`TABLE_BEGIN` and :data:`TABLE_END`
    of the Markdown file ``path`` with ``table``."""
    with open(path) as f:
        text = f.read()
    pattern = re.escape(TABLE_BEGIN) + '.*?' + re.escape(TABLE_END)
    if not re.search(pattern, text, flags=re.S):
        raise SystemExit(f'get_flops.py: {path} has no {TABLE_BEGIN} ... '
                         f'{TABLE_END} block to replace.')
    block = f'{TABLE_BEGIN}\n{table}\n{TABLE_END}'
    with open(path, 'w') as f:
        f.write(re.sub(pattern, lambda _: block, text, flags=re.S))
