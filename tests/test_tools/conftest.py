"""Fixtures of the tool tests: a tiny dataset and a finished run."""
import pickle

import pytest
from demo_runs import build_once, session_folder
# The hub tests' weights server and model index, for exports by name.
from hub_server import model_index, weights_server  # noqa: F401
from tool_utils import NUM_TRAIN, NUM_VAL, run_tool, write_config, write_images


@pytest.fixture(scope='session')
def data_root(tmp_path_factory):
    """A dataset of 16 train and 8 val images in two classes (one for all
    pytest-xdist workers)."""

    def build(root):
        write_images(root / 'train', NUM_TRAIN, seed=0)
        write_images(root / 'val', NUM_VAL, seed=1)

    root = session_folder(tmp_path_factory) / 'tiny_cls'
    build_once(root, build)
    return root


@pytest.fixture
def make_config(tmp_path, data_root):
    """``make_config(name, extra='')`` writes a config into ``tmp_path``."""

    def make(name, extra='', root=data_root):
        return write_config(tmp_path / name, root, extra)

    return make


@pytest.fixture(scope='session')
def full_run(tmp_path_factory, data_root):
    """Work dir of an uninterrupted 4-epoch (16-iteration) training run,
    trained once for all pytest-xdist workers."""

    def train(work_dir):
        config = write_config(work_dir / 'config.py', data_root)
        result = run_tool('train.py', config, '--work-dir', work_dir)
        assert result.returncode == 0

    work_dir = session_folder(tmp_path_factory) / 'full_run'
    build_once(work_dir, train)
    return work_dir


@pytest.fixture(scope='session')
def predictions(tmp_path_factory, data_root, full_run):
    """Test the full run's last checkpoint with ``--out`` and ``--show-dir``
    (once for all pytest-xdist workers).

    Returns:
        dict: ``preds`` (the dumped list), ``work_dir`` and ``output`` (the
        run's stdout and stderr).
    """

    def test(work_dir):
        config = write_config(work_dir / 'config.py', data_root)
        result = run_tool('test.py', config, full_run / 'epoch_4.pth',
                          '--work-dir', work_dir, '--out',
                          work_dir / 'preds.pkl', '--show-dir',
                          work_dir / 'vis')
        assert result.returncode == 0
        return result.stdout + result.stderr

    work_dir = session_folder(tmp_path_factory) / 'test_run'
    output = build_once(work_dir, test)
    with open(work_dir / 'preds.pkl', 'rb') as f:
        preds = pickle.load(f)
    return dict(preds=preds, work_dir=work_dir, output=output)
