"""tools/test.py run as a user runs it: dumps, drawings, TTA."""
import json
import pickle
import re

import pytest
import torch
from tool_utils import NUM_VAL, run_tool


def accuracy(preds):
    """Top-1 accuracy in percent of dumped classification predictions."""
    hits = [int(p['pred_label']) == int(p['gt_label']) for p in preds]
    return 100 * sum(hits) / len(hits)


def test_out_dumps_every_prediction(predictions):
    preds = predictions['preds']
    assert [p['sample_idx'] for p in preds] == list(range(NUM_VAL))
    for pred in preds:
        assert pred['pred_score'].shape == (2, )
        assert int(pred['pred_label']) == int(pred['pred_score'].argmax())
    logged = re.search(r'accuracy/top1: ([\d.]+)', predictions['output'])
    assert float(logged.group(1)) == pytest.approx(accuracy(preds), abs=1e-3)


def test_show_dir_draws_every_image(predictions):
    drawn = list((predictions['work_dir'] / 'vis').glob('*.png'))
    assert len(drawn) == NUM_VAL


@pytest.mark.slow
def test_out_item_metrics(full_run, predictions, make_config, tmp_path):
    out = tmp_path / 'metrics.json'
    result = run_tool('test.py', make_config('test.py'),
                      full_run / 'epoch_4.pth', '--work-dir',
                      tmp_path / 'work', '--out', out, '--out-item', 'metrics')
    assert result.returncode == 0
    metrics = json.loads(out.read_text())
    assert metrics['accuracy/top1'] == pytest.approx(
        accuracy(predictions['preds']), abs=1e-3)


def dump_predictions(tool_args, out):
    """Run tools/test.py with ``--out out``; return the dumped list."""
    result = run_tool('test.py', *tool_args, '--out', out)
    assert result.returncode == 0
    with open(out, 'rb') as f:
        return pickle.load(f)


@pytest.mark.slow
def test_tta_averages_plain_and_flipped_scores(full_run, predictions,
                                               make_config, tmp_path):
    flipped_config = make_config(
        'flipped.py', "test_dataloader['dataset']['pipeline'] = ["
        "dict(type='LoadImageFromFile'), dict(type='RandomFlip', prob=1.), "
        "dict(type='PackInputs')]")
    checkpoint = full_run / 'epoch_4.pth'
    flipped = dump_predictions(
        [flipped_config, checkpoint, '--work-dir', tmp_path / 'w1'],
        tmp_path / 'flipped.pkl')
    tta = dump_predictions([
        make_config('test.py'), checkpoint, '--work-dir', tmp_path / 'w2',
        '--tta'
    ], tmp_path / 'tta.pkl')
    assert len(tta) == NUM_VAL
    for plain, flip, both in zip(predictions['preds'], flipped, tta):
        assert not torch.equal(plain['pred_score'], flip['pred_score'])
        expected = (plain['pred_score'] + flip['pred_score']) / 2
        assert torch.allclose(both['pred_score'], expected, rtol=0, atol=1e-6)
