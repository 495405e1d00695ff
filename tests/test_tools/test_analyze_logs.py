"""tools/analysis_tools/analyze_logs.py on the log of a short training
run (4 epochs, validation after each)."""
import re

import numpy as np
from PIL import Image
from tool_utils import run_tool

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


def test_plot_curve_says_which_keys_exist(full_run, tmp_path):
    result = run_tool(ANALYZE, 'plot_curve', full_run, '--keys', 'mIoU',
                      '--out', tmp_path / 'x.png')
    assert result.returncode == 1
    assert "No log holds 'mIoU'" in result.stderr
    assert "'accuracy/top1'" in result.stderr and "'loss'" in result.stderr


def test_cal_train_time_prints_the_mean_iteration_time(full_run):
    result = run_tool(ANALYZE, 'cal_train_time', full_run)
    assert result.returncode == 0, result.stderr
    mean = float(re.search(r'mean iteration time: ([0-9.]+) s',
                           result.stdout).group(1))
    assert 0 < mean < 60


def test_missing_log_is_named(tmp_path):
    result = run_tool(ANALYZE, 'cal_train_time', tmp_path / 'none')
    assert result.returncode == 1
    assert 'no scalars.json' in result.stderr
