"""A truncated or corrupt checkpoint stops every tool that reads one with
one line that names the file, before any training or testing: tools/test.py,
tools/train.py (``--resume``, ``load_from``) and the model converters.

The configs of tools/train.py and tools/test.py are checked in-process
(:func:`mmtnt.engine.runner_config.load_config`, which the tools call
before they build the runner); the command lines run as a
user runs them."""
import numpy as np
import pytest
import torch
from tool_utils import run_tool

from mmtnt.converters import convert_tnt
from mmtnt.converters.cli import run_converter
from mmtnt.engine.cli import parse_test_args, parse_train_args
from mmtnt.engine.runner_config import load_config as load_tool_config
from mmtnt.utils import CheckpointFileError, check_checkpoint_file

BAD = ('truncated.pth', 'random.pth')


@pytest.fixture(scope='module')
def checkpoints(tmp_path_factory):
    """A small real checkpoint (and one in torch's legacy format), a copy
    of it cut in half, as many random bytes and an empty file."""
    folder = tmp_path_factory.mktemp('checkpoints')
    state = torch.nn.Linear(32, 32).state_dict()
    torch.save(state, folder / 'good.pth')
    torch.save(
        state, folder / 'legacy.pth', _use_new_zipfile_serialization=False)
    data = (folder / 'good.pth').read_bytes()
    (folder / 'truncated.pth').write_bytes(data[:len(data) // 2])
    rng = np.random.default_rng(0)
    (folder / 'random.pth').write_bytes(rng.bytes(len(data)))
    (folder / 'empty.pth').write_bytes(b'')
    return folder


@pytest.mark.parametrize('name', ['good.pth', 'legacy.pth'])
def test_whole_checkpoints_pass(checkpoints, name):
    check_checkpoint_file(str(checkpoints / name))
    check_checkpoint_file(None)
    check_checkpoint_file('https://example.com/weights.pth')


@pytest.mark.parametrize('name, problem', [
    ('truncated.pth', 'whose end is missing'),
    ('random.pth', "neither a zip archive nor torch's legacy format"),
    ('empty.pth', 'it is empty'),
    ('missing.pth', 'no such file'),
])
def test_bad_files_raise_one_line(checkpoints, name, problem):
    path = str(checkpoints / name)
    with pytest.raises(CheckpointFileError) as info:
        check_checkpoint_file(path)
    message = str(info.value)
    assert message.startswith(f'cannot read checkpoint {path}: ')
    assert problem in message
    assert '\n' not in message


def stop_message(func, *args):
    """Run ``func``; return the one-line message it exits with."""
    with pytest.raises(SystemExit) as info:
        func(*args)
    message = info.value.code
    assert isinstance(message, str), message  # printed, exit status 1
    assert '\n' not in message
    return message


def load_config(parse_args, *argv):
    """``load_config`` of the command line ``argv``, parsed by
    ``parse_args`` (``parse_train_args`` or ``parse_test_args``)."""
    return load_tool_config(parse_args([str(arg) for arg in argv]))


@pytest.mark.parametrize('name', BAD)
@pytest.mark.parametrize('entry', ['test', 'resume', 'load_from'])
def test_tools_stop_before_the_runner(entry, name, checkpoints, make_config,
                                      tmp_path, monkeypatch):
    bad = checkpoints / name
    work_dir = tmp_path / 'work'
    if entry == 'test':
        tool, cli = 'test', parse_test_args
        argv = [make_config('cfg.py'), bad]
    elif entry == 'resume':
        tool, cli = 'train', parse_train_args
        argv = [make_config('cfg.py'), '--resume', bad]
    else:
        tool, cli = 'train', parse_train_args
        argv = [make_config('cfg.py', f"load_from = '{bad}'")]
    monkeypatch.setenv('LOCAL_RANK', '0')
    message = stop_message(load_config, cli, *argv, '--work-dir', work_dir)
    assert message.startswith(
        f'tools/{tool}.py: cannot read checkpoint {bad}: the file is '
        'truncated or not a PyTorch checkpoint (')
    # nothing made yet: the runner, which the tools build next, would make
    # the work dir
    assert not work_dir.exists()


def test_auto_resume_checks_the_latest_checkpoint(checkpoints, make_config,
                                                  tmp_path, monkeypatch):
    work_dir = tmp_path / 'work'
    work_dir.mkdir()
    bad = checkpoints / 'truncated.pth'
    (work_dir / 'last_checkpoint').write_text(str(bad))
    monkeypatch.setenv('LOCAL_RANK', '0')
    message = stop_message(load_config, parse_train_args,
                           make_config('cfg.py'), '--work-dir', work_dir,
                           '--resume')
    assert message.startswith(f'tools/train.py: cannot read checkpoint {bad}')
    assert sorted(p.name for p in work_dir.iterdir()) == ['last_checkpoint']


@pytest.mark.parametrize('name', BAD)
def test_converter_stops(name, checkpoints, tmp_path):
    bad = checkpoints / name
    dst = tmp_path / 'converted.pth'
    message = stop_message(run_converter, convert_tnt, 'TNT', lambda _: '',
                           [str(bad), str(dst)])
    assert f': cannot read checkpoint {bad}: the file is truncated' in message
    assert not dst.exists()


@pytest.mark.parametrize('tool', ['test.py', 'model_converters/tnt2mmtnt.py'])
def test_command_line_prints_one_line(tool, checkpoints, make_config,
                                      tmp_path):
    bad = checkpoints / 'truncated.pth'
    if tool == 'test.py':
        args = [make_config('cfg.py'), bad, '--work-dir', tmp_path / 'work']
    else:
        args = [bad, tmp_path / 'converted.pth']
    result = run_tool(tool, *args)
    assert result.returncode == 1
    assert 'Traceback' not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert f'cannot read checkpoint {bad}: the file is truncated' in last
