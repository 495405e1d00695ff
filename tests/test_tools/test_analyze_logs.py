"""tools/analysis_tools/analyze_logs.py (mmtnt.analysis.logs and cli) on
the log of a short training run (4 epochs, validation after each)."""
import json
import re

import numpy as np
import pytest
from PIL import Image
from tool_utils import run_tool

from mmtnt.analysis.cli import analyze_logs as main
from mmtnt.analysis.logs import draw_curves, load_scalars

ANALYZE = 'analysis_tools/analyze_logs.py'


def test_plot_curve_draws_training_and_validation_keys(full_run, tmp_path):
    out = tmp_path / 'curves.png'
    result = run_tool(ANALYZE, 'plot_curve', full_run, full_run, '--keys',
                      'loss', 'lr', 'accuracy/top1', '--legend', 'a', 'b',
                      '--out', out)
    assert result.returncode == 0, result.stderr
    image = np.asarray(Image.open(out).convert('L'))
    # Three panels of 300 pixels, drawn on: not one flat colour.
    assert image.shape == (900, 800)
    assert image.std() > 10


def test_key_of_training_and_validation_is_drawn_per_split(tmp_path):
    """``time`` is logged by training iterations (``iter``) and by each
    validation (``step``: the epoch): two panels, each line with its own
    records' x and y, never one line through both."""
    losses, times = [1.0, 0.9, 0.8, 0.7], [0.2, 0.21, 0.22, 0.23]
    train = [
        dict(loss=losses[i], time=times[i], epoch=1 + i // 2,
             iter=5 * (i + 1), step=5 * (i + 1)) for i in range(4)
    ]
    val = [{'accuracy/top1': 50.0, 'time': 0.05, 'step': 1},
           {'accuracy/top1': 60.0, 'time': 0.07, 'step': 2}]
    log = tmp_path / 'scalars.json'
    log.write_text(''.join(json.dumps(r) + '\n' for r in train + val))
    fig = draw_curves([load_scalars(str(log))], ['run'], ['loss', 'time'])
    drawn = {
        ax.get_title():
        (ax.get_xlabel(), [(list(line.get_xdata()), list(line.get_ydata()))
                           for line in ax.get_lines()])
        for ax in fig.axes
    }
    assert drawn == {
        'loss': ('iteration', [([5, 10, 15, 20], losses)]),
        'time (train)': ('iteration', [([5, 10, 15, 20], times)]),
        'time (val)': ('epoch', [([1, 2], [0.05, 0.07])]),
    }


def test_plot_curve_says_which_keys_exist(full_run, tmp_path):
    with pytest.raises(SystemExit) as info:
        main(['plot_curve', str(full_run), '--keys', 'mIoU', '--out',
              str(tmp_path / 'x.png')])
    message = info.value.code
    assert "No log holds 'mIoU'" in message
    assert "'accuracy/top1'" in message and "'loss'" in message
    assert not (tmp_path / 'x.png').exists()


def test_cal_train_time_prints_the_mean_iteration_time(full_run, capsys):
    main(['cal_train_time', str(full_run)])
    mean = float(re.search(r'mean iteration time: ([0-9.]+) s',
                           capsys.readouterr().out).group(1))
    assert 0 < mean < 60


def test_missing_log_is_named(tmp_path):
    with pytest.raises(SystemExit, match='^Error: .*no scalars.json'):
        main(['cal_train_time', str(tmp_path / 'none')])
