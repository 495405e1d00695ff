"""tools/train.py and tools/test.py on a segmentation config (mmseg scope)."""
import pickle

import numpy as np
import pytest
from PIL import Image
from tool_utils import SEG_CONFIG, load_checkpoint, run_tool, write_config

NUM_IMAGES = 4


def write_segmentation_data(root):
    """Write noise images whose right half is class 1 in the label maps."""
    rng = np.random.default_rng(0)
    (root / 'img').mkdir(parents=True)
    (root / 'ann').mkdir()
    label = np.zeros((32, 32), np.uint8)
    label[:, 16:] = 1
    for i in range(NUM_IMAGES):
        pixels = rng.integers(0, 256, (32, 32, 3)).astype(np.uint8)
        Image.fromarray(pixels).save(root / 'img' / f'{i}.png')
        Image.fromarray(label).save(root / 'ann' / f'{i}.png')


@pytest.mark.slow
def test_train_and_test_segmentation(tmp_path):
    write_segmentation_data(tmp_path / 'data')
    config = write_config(
        tmp_path / 'seg.py', tmp_path / 'data', base=SEG_CONFIG)
    work_dir = tmp_path / 'work'
    result = run_tool('train.py', config, '--work-dir', work_dir)
    assert result.returncode == 0
    checkpoint = work_dir / 'iter_2.pth'
    assert load_checkpoint(checkpoint)['meta']['iter'] == 2

    out = tmp_path / 'preds.pkl'
    result = run_tool('test.py', config, checkpoint, '--work-dir', work_dir,
                      '--out', out, '--show-dir', tmp_path / 'vis')
    assert result.returncode == 0
    assert 'mIoU' in result.stdout + result.stderr
    with open(out, 'rb') as f:
        preds = pickle.load(f)
    assert len(preds) == NUM_IMAGES
    for pred in preds:
        assert pred['pred_sem_seg']['data'].shape == (1, 32, 32)
    assert len(list((tmp_path / 'vis').rglob('*.png'))) == NUM_IMAGES
