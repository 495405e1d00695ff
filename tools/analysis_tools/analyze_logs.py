"""Plot the curves of training runs and time their iterations, from the
scalar logs mmengine writes (``<work_dir>/<timestamp>/vis_data/
scalars.json``: one JSON object a line; training lines carry ``iter``,
validation lines only ``step``, the epoch or iteration they ran at).

A LOG argument is a ``scalars.json`` file or a work directory, whose latest
run that has one is read.

Examples::

    # loss and learning rate by iteration, validation accuracy by epoch
    # (or by iteration, for iteration-based runs)
    python tools/analysis_tools/analyze_logs.py plot_curve \\
        work_dirs/tnt-demo_1xb128_fashion-mnist \\
        --keys loss lr accuracy/top1 --out curves.png
    # two runs in one plot
    python tools/analysis_tools/analyze_logs.py plot_curve RUN_A RUN_B \\
        --keys mIoU --legend fp32 amp --out miou.png
    python tools/analysis_tools/analyze_logs.py cal_train_time RUN_A
"""
import argparse
import glob
import json
import os.path as osp
import statistics


def find_scalars(log):
    """The ``scalars.json`` that ``log`` names.

    Args:
        log (str): A ``scalars.json`` file or a work directory.

    Returns:
        str: The path of the file; in a work directory, that of the latest
        run (timestamped folders sort by time).

    Raises:
        FileNotFoundError: When there is none.
    """
    if osp.isfile(log):
        return log
    found = sorted(glob.glob(osp.join(log, '*', 'vis_data', 'scalars.json')))
    found += sorted(glob.glob(osp.join(log, 'vis_data', 'scalars.json')))
    if not found:
        raise FileNotFoundError(
            f'{log}: no scalars.json file, nor a work directory with '
            '<timestamp>/vis_data/scalars.json in it.')
    return found[-1]


def load_scalars(path):
    """Split a scalar log into training and validation records.

    Args:
        path (str): A ``scalars.json`` file.

    Returns:
        tuple[list[dict], list[dict]]: The training lines (with ``iter``)
        and the validation lines (without).
    """
    train, val = [], []
    with open(path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                (train if 'iter' in record else val).append(record)
    return train, val


def curve(records, key):
    """The (x, y) points of ``key`` in ``records``: x is the iteration of a
    training line, the ``step`` of a validation line."""
    points = [(record.get('iter', record['step']), record[key])
              for record in records if key in record]
    return [x for x, _ in points], [y for _, y in points]


def x_label(train, val, key):
    """What the x axis of ``key`` counts: iterations for training keys;
    epochs or iterations for validation keys, as the run validated."""
    if not any(key in record for record in val):
        return 'iteration'
    return 'epoch' if any('epoch' in record for record in train) else \
        'iteration'


def plot_curve(args):
    """Draw one panel per key, one line per run, and save the figure."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    runs = [load_scalars(find_scalars(log)) for log in args.logs]
    legend = args.legend or [osp.basename(osp.normpath(log))
                             for log in args.logs]
    if len(legend) != len(args.logs):
        raise SystemExit(f'--legend needs one name per log: {len(args.logs)}'
                         f' logs, {len(legend)} names.')
    fig, axes = plt.subplots(
        len(args.keys), 1, figsize=(8, 3 * len(args.keys)), squeeze=False)
    for ax, key in zip(axes[:, 0], args.keys):
        labels = set()
        for (train, val), name in zip(runs, legend):
            xs, ys = curve(train + val, key)
            if xs:
                # Validations are few: mark each one.
                ax.plot(xs, ys, label=name, marker='o' if len(xs) < 30 else
                        None)
                labels.add(x_label(train, val, key))
        if not labels:
            keys = sorted({k for train, val in runs for r in train + val
                           for k in r} - {'step', 'iter', 'epoch'})
            raise SystemExit(f'No log holds {key!r}; keys found: {keys}.')
        ax.set_title(key)
        ax.set_xlabel(' / '.join(sorted(labels)))
        ax.legend()
        ax.grid(alpha=0.3)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f'saved {args.out}')


def cal_train_time(args):
    """Print the mean, slowest and fastest logged iteration time of each
    run; the first logged interval (warm-up) is left out."""
    for log in args.logs:
        path = find_scalars(log)
        train, _ = load_scalars(path)
        times = [record['time'] for record in train if 'time' in record]
        if not args.include_first:
            times = times[1:]
        if not times:
            raise SystemExit(f'{path}: no iteration times logged.')
        print(f'{path}\n'
              f'  mean iteration time: {statistics.mean(times):.4f} s '
              f'over {len(times)} logged intervals\n'
              f'  slowest: {max(times):.4f} s, fastest: {min(times):.4f} s, '
              f'std: {statistics.pstdev(times):.4f} s')


def parse_args(argv=None):
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


def main(argv=None):
    args = parse_args(argv)
    try:
        {'plot_curve': plot_curve, 'cal_train_time': cal_train_time}[
            args.task](args)
    except FileNotFoundError as error:
        raise SystemExit(f'Error: {error}')


if __name__ == '__main__':
    main()
