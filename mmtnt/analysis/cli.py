"""The command lines of ``tools/analysis_tools/``: ``get_flops.py``
(:func:`get_flops`) and ``analyze_logs.py`` (:func:`analyze_logs`)."""
import argparse

import torch

from ..utils.cli import add_cfg_options
from .complexity import (COUNTER, SDPA_NOTE, TABLE_BEGIN, TABLE_END,
                         TABLE_HEADER, report, table_rows, write_doc)
from .flops import analyze, load_config
from .logs import cal_train_time, plot_curve
from .tables import format_table


def parse_shape(parser, shape, option='--shape'):
    """An ``H [W]`` option as (H, W); a parser error if it is not one or
    two positive integers; None stays None."""
    if shape is None:
        return None
    if len(shape) not in (1, 2) or min(shape) < 1:
        parser.error(f'{option} takes H or H W, positive integers; got '
                     f'{" ".join(map(str, shape))}')
    return (shape[0], shape[-1])


def get_flops_args(argv=None):
    """The options of ``get_flops.py`` in ``argv`` (else ``sys.argv``),
    ``shape`` as (H, W) or None."""
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
    add_cfg_options(parser)
    parser.add_argument(
        '--table',
        action='store_true',
        help='count the ImageNet classifiers of the model index and print '
        'a Markdown table next to the papers\' figures')
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


def get_flops(argv=None):
    """``get_flops.py``: print the report of a config, or the papers'
    table; ``argv`` instead of ``sys.argv[1:]``."""
    args = get_flops_args(argv)
    torch.manual_seed(0)
    if args.table:
        table = format_table(TABLE_HEADER, table_rows())
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


def analyze_logs_args(argv=None):
    """The options of ``analyze_logs.py`` (``task`` names the
    subcommand)."""
    parser = argparse.ArgumentParser(
        description='Plot curves or time iterations of mmengine logs.')
    sub = parser.add_subparsers(dest='task', required=True)
    plot = sub.add_parser('plot_curve', help='plot keys against iterations')
    plot.add_argument('logs', nargs='+', help='scalars.json files or work '
                      'directories')
    plot.add_argument(
        '--keys', nargs='+', default=['loss'],
        help='logged keys, e.g. loss lr accuracy/top1 coco/bbox_mAP mIoU')
    plot.add_argument('--legend', nargs='+', help='a name per log')
    plot.add_argument('--title', help='the figure title')
    plot.add_argument('--out', required=True, help='the PNG to write')
    timing = sub.add_parser(
        'cal_train_time', help='mean time of a training iteration')
    timing.add_argument('logs', nargs='+', help='scalars.json files or work '
                        'directories')
    timing.add_argument(
        '--include-first', action='store_true',
        help='count the first logged interval (warm-up) too')
    return parser.parse_args(argv)


def analyze_logs(argv=None):
    """``analyze_logs.py``: ``plot_curve`` or ``cal_train_time``; one
    line (``SystemExit``) for a missing log or key."""
    args = analyze_logs_args(argv)
    try:
        {'plot_curve': plot_curve, 'cal_train_time': cal_train_time}[
            args.task](args)
    except FileNotFoundError as error:
        raise SystemExit(f'Error: {error}')
