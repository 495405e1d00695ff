"""Curves and iteration times of training runs, from mmengine's
``<work_dir>/<timestamp>/vis_data/scalars.json`` (training lines carry
``iter``, validation lines only ``step``)."""
import glob
import json
import os.path as osp
import statistics

SPLITS = ('train', 'val')


def find_scalars(log):
    """The ``scalars.json`` file ``log``, or the latest run's in the work
    directory ``log``."""
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
    """The training records (with ``iter``) and the validation records
    (without) of the scalar log ``path``."""
    train, val = [], []
    with open(path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                (train if 'iter' in record else val).append(record)
    return train, val


def curve(records, key):
    """The x (``iter``, else ``step``) and y values of ``key`` in
    ``records``."""
    points = [(record.get('iter', record['step']), record[key])
              for record in records if key in record]
    return [x for x, _ in points], [y for _, y in points]


def panels(runs, keys):
    """(title, key, split) of each panel: one per key and split that logs
    it; ``SystemExit`` when no run logs a key."""
    found = []
    for key in keys:
        splits = [
            split for split in range(len(SPLITS))
            if any(key in record for run in runs for record in run[split])
        ]
        if not splits:
            logged = sorted({k for run in runs for records in run
                             for record in records for k in record} -
                            {'step', 'iter', 'epoch'})
            raise SystemExit(f'No log holds {key!r}; keys found: {logged}.')
        for split in splits:
            title = f'{key} ({SPLITS[split]})' if len(splits) > 1 else key
            found.append((title, key, split))
    return found


def x_label(train, split):
    """What the x axis of a split counts: iterations, or epochs."""
    if split == 0:
        return 'iteration'
    return 'epoch' if any('epoch' in record for record in train) else \
        'iteration'


def draw_curves(runs, legend, keys, title=None):
    """Draw one panel per key and split (:func:`panels`), one line per run.

    Args:
        runs (list[tuple[list[dict], list[dict]]]): The training and
            validation records of each run (:func:`load_scalars`).
        legend (list[str]): A name per run.
        keys (list[str]): The keys to draw.
        title (str, optional): The figure title.

    Returns:
        matplotlib.figure.Figure: Drawn with the Agg backend.
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    drawn = panels(runs, keys)
    fig, axes = plt.subplots(
        len(drawn), 1, figsize=(8, 3 * len(drawn)), squeeze=False)
    for ax, (name, key, split) in zip(axes[:, 0], drawn):
        labels = set()
        for run, run_name in zip(runs, legend):
            xs, ys = curve(run[split], key)
            if xs:
                # Validations are few: mark each one.
                ax.plot(xs, ys, label=run_name,
                        marker='o' if len(xs) < 30 else None)
                labels.add(x_label(run[0], split))
        ax.set_title(name)
        ax.set_xlabel(' / '.join(sorted(labels)))
        ax.legend()
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_curve(args):
    """``plot_curve``: draw ``args.keys`` of ``args.logs`` to ``args.out``."""
    runs = [load_scalars(find_scalars(log)) for log in args.logs]
    legend = args.legend or [osp.basename(osp.normpath(log))
                             for log in args.logs]
    if len(legend) != len(args.logs):
        raise SystemExit(f'--legend needs one name per log: {len(args.logs)}'
                         f' logs, {len(legend)} names.')
    fig = draw_curves(runs, legend, args.keys, args.title)
    fig.savefig(args.out, dpi=100)
    print(f'saved {args.out}')


def cal_train_time(args):
    """``cal_train_time``: print the iteration times of each log, without
    the first (warm-up) unless ``args.include_first``."""
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
