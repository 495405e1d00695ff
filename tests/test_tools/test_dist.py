"""tools/dist_train.sh and dist_test.sh with 2 CPU processes (gloo)."""
import math
import pickle

import pytest
import torch
from tool_utils import (NUM_TRAIN, NUM_VAL, assert_same_tensors, free_port,
                        load_checkpoint, run_tool)


def use_free_port(monkeypatch):
    """Make the scripts use a free port (run_tool copies os.environ)."""
    monkeypatch.setenv('PORT', str(free_port()))


@pytest.mark.slow
def test_dist_train_on_cpu_keeps_ranks_in_sync(make_config, tmp_path,
                                               monkeypatch):
    use_free_port(monkeypatch)
    work_dir = tmp_path / 'work'
    config = make_config(
        'dist.py', "custom_imports = dict(imports=['tool_test_hooks'])\n"
        "custom_hooks = [dict(type='RecordRankHook')]")
    result = run_tool('dist_train.sh', config, 2, '--work-dir', work_dir,
                      '--cfg-options', 'train_cfg.max_epochs=2')
    assert result.returncode == 0
    ranks = [load_checkpoint(work_dir / f'rank{r}.pth') for r in (0, 1)]
    for record in ranks:
        assert record['world_size'] == 2
        assert record['wrapper'] == 'MMDistributedDataParallel'
        assert record['device_ids'] is None
        # 2 epochs of 16 images, 4 per batch, split over 2 ranks
        assert len(record['losses']) == 4
        assert all(math.isfinite(loss) for loss in record['losses'])
    # Each rank trained on its own half of every epoch ...
    per_epoch = NUM_TRAIN // 2
    for epoch in range(2):
        halves = [
            set(r['samples'][epoch * per_epoch:][:per_epoch]) for r in ranks
        ]
        assert halves[0].isdisjoint(halves[1])
        assert halves[0] | halves[1] == set(range(NUM_TRAIN))
    assert ranks[0]['losses'] != ranks[1]['losses']
    # ... yet both ended with the same weights: gradients were averaged.
    assert_same_tensors(ranks[0]['state_dict'], ranks[1]['state_dict'])
    checkpoint = load_checkpoint(work_dir / 'epoch_2.pth')
    assert_same_tensors(checkpoint['state_dict'], ranks[1]['state_dict'])
    initial = load_checkpoint(work_dir / 'epoch_1.pth')['state_dict']
    assert not all(
        torch.equal(initial[k], checkpoint['state_dict'][k]) for k in initial)


@pytest.mark.slow
def test_dist_test_on_cpu_matches_single_process(full_run, predictions,
                                                 make_config, tmp_path,
                                                 monkeypatch):
    use_free_port(monkeypatch)
    out = tmp_path / 'dist.pkl'
    result = run_tool('dist_test.sh', make_config('test.py'),
                      full_run / 'epoch_4.pth', 2, '--work-dir',
                      tmp_path / 'work', '--out', out)
    assert result.returncode == 0
    with open(out, 'rb') as f:
        dumped = pickle.load(f)
    assert [p['sample_idx'] for p in dumped] == list(range(NUM_VAL))
    for expected, actual in zip(predictions['preds'], dumped):
        assert torch.allclose(
            expected['pred_score'], actual['pred_score'], atol=1e-5)
