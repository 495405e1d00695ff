"""tools/train.py run as a user runs it: resuming, AMP, missing data."""
import math
import signal
import time

import pytest
from tool_utils import assert_same_tensors, load_checkpoint, run_tool

HOOKS_IMPORT = "custom_imports = dict(imports=['tool_test_hooks'])\n"


@pytest.mark.slow
def test_resume_after_kill_matches_uninterrupted_run(full_run, make_config,
                                                     tmp_path):
    work_dir = tmp_path / 'work'
    # Killed mid-epoch 3, at iteration 10: epoch_2.pth (iteration 8) is
    # the last checkpoint and two iterations are lost.
    killed = make_config(
        'killed.py', HOOKS_IMPORT +
        "custom_hooks = [dict(type='KillAfterIterHook', iteration=10)]")
    result = run_tool('train.py', killed, '--work-dir', work_dir)
    assert result.returncode == -signal.SIGKILL
    assert (work_dir / 'epoch_2.pth').is_file()
    assert not (work_dir / 'epoch_3.pth').exists()
    # The runs agree up to the kill: the set-up is deterministic.
    assert_same_tensors(
        load_checkpoint(full_run / 'epoch_2.pth')['state_dict'],
        load_checkpoint(work_dir / 'epoch_2.pth')['state_dict'])

    result = run_tool('train.py', make_config('resumed.py'), '--work-dir',
                      work_dir, '--resume')
    assert result.returncode == 0
    assert 'resumed epoch: 2, iter: 8' in result.stdout + result.stderr

    expected = load_checkpoint(full_run / 'epoch_4.pth')
    resumed = load_checkpoint(work_dir / 'epoch_4.pth')
    for key in ('state_dict', 'optimizer', 'param_schedulers'):
        assert_same_tensors(expected[key], resumed[key])
    assert resumed['meta']['iter'] == 16
    # Training did move the weights after the resumed epoch.
    with pytest.raises(AssertionError):
        assert_same_tensors(
            load_checkpoint(work_dir / 'epoch_2.pth')['state_dict'],
            resumed['state_dict'])


def test_every_checkpoint_loads_with_weights_only(full_run):
    checkpoints = sorted(full_run.glob('*.pth'))
    # epoch_1..4 and the best one (numpy scores in the message hub)
    assert len(checkpoints) == 5
    for path in checkpoints:
        checkpoint = load_checkpoint(path)
        assert checkpoint['meta']['dataset_meta']['classes'] == ('class_a',
                                                                 'class_b')
        assert 'train/loss' in checkpoint['message_hub']['log_scalars']


@pytest.mark.slow
def test_amp_trains_in_bfloat16_on_cpu_with_scaled_lr(make_config, tmp_path):
    work_dir = tmp_path / 'work'
    config = make_config(
        'amp.py', HOOKS_IMPORT + 'custom_hooks = ['
        "dict(type='RecordDtypeHook'), dict(type='RecordRankHook')]")
    result = run_tool('train.py', config, '--work-dir', work_dir, '--amp',
                      '--auto-scale-lr', '--cfg-options',
                      'train_cfg.max_epochs=1',
                      'auto_scale_lr.base_batch_size=2')
    assert result.returncode == 0
    assert 'CPU accelerator: on' in result.stdout + result.stderr
    assert (work_dir / 'linear_dtypes.txt').read_text() == 'torch.bfloat16'
    record = load_checkpoint(work_dir / 'rank0.pth')
    assert len(record['losses']) == 4
    assert all(math.isfinite(loss) for loss in record['losses'])
    checkpoint = load_checkpoint(work_dir / 'epoch_1.pth')
    # batch 4 over base_batch_size 2 doubles lr=1e-3
    assert checkpoint['optimizer']['param_groups'][0]['initial_lr'] == 2e-3
    assert "type='mmtnt.CPUAmpOptimWrapper'" in checkpoint['meta']['cfg']
    assert "dtype='bfloat16'" in checkpoint['meta']['cfg']


def test_no_cpu_accel_trains_the_plain_model(make_config, tmp_path):
    result = run_tool('train.py', make_config('plain.py'), '--work-dir',
                      tmp_path / 'work', '--no-cpu-accel', '--cfg-options',
                      'train_cfg.max_epochs=1')
    assert result.returncode == 0
    assert 'CPU accelerator: off' in result.stdout + result.stderr
    assert (tmp_path / 'work' / 'epoch_1.pth').is_file()


@pytest.mark.parametrize('tool', ['train.py', 'test.py'])
def test_missing_dataset_stops_at_once(tool, make_config, tmp_path):
    missing = tmp_path / 'no_such_dataset'
    work_dir = tmp_path / 'work'
    config = make_config('missing.py', root=missing)
    args = [config, 'no_such.pth'] if tool == 'test.py' else [config]
    start = time.monotonic()
    result = run_tool(tool, *args, '--work-dir', work_dir)
    elapsed = time.monotonic() - start
    assert result.returncode == 1
    assert str(missing) in result.stderr
    assert 'docs/datasets.md' in result.stderr
    assert 'Traceback' not in result.stderr
    # stopped before the runner: it would have made the work dir
    assert not work_dir.exists()
    assert elapsed < 30, elapsed
