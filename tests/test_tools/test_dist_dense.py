"""tools/dist_train.sh with 2 CPU processes (gloo) on the dense demos.

A detection (RetinaNet) and a segmentation (UperNet) demo config train
briefly on a small build of the demo scenes; the ranks must split the data,
average their gradients (same parameters at the end) and leave a
checkpoint with those parameters.
"""
import math

import pytest
import torch
from tool_utils import REPO, free_port, load_checkpoint, run_tool, write_config

from mmtnt.datasets.demo_scenes import build

NUM_TRAIN = 16
DEMOS = REPO / 'configs' / 'demo'
DET_CONFIG = DEMOS / 'retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
SEG_CONFIG = DEMOS / 'upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
RECORD = ("custom_imports = dict(imports=['dense_test_hooks'])\n"
          "custom_hooks = [dict(type='RecordRankParamsHook')]\n")


@pytest.fixture(scope='module')
def scenes(tmp_path_factory, fashion_mnist_source):
    """16 training and 4 validation scenes of each dataset."""
    out = tmp_path_factory.mktemp('scenes')
    build(str(out), NUM_TRAIN, 4, src=fashion_mnist_source)
    return out


def check_ranks(work_dir, checkpoint, num_iters):
    """Both ranks trained on their own halves and ended in sync."""
    ranks = [load_checkpoint(work_dir / f'rank{r}.pth') for r in (0, 1)]
    for record in ranks:
        assert record['world_size'] == 2
        assert record['wrapper'] == 'MMDistributedDataParallel'
        assert len(record['losses']) == num_iters
        assert all(math.isfinite(loss) for loss in record['losses'])
    halves = [set(r['images']) for r in ranks]
    assert halves[0].isdisjoint(halves[1])
    assert len(halves[0] | halves[1]) == NUM_TRAIN
    assert ranks[0]['losses'] != ranks[1]['losses']
    # Same start, different data, same end: gradients were averaged.
    for key, initial in ranks[0]['initial'].items():
        assert torch.equal(initial, ranks[1]['initial'][key]), key
        assert torch.equal(ranks[0]['final'][key], ranks[1]['final'][key]), key
    final = ranks[0]['final']
    assert not all(
        torch.equal(ranks[0]['initial'][k], final[k]) for k in final)
    state = load_checkpoint(checkpoint)['state_dict']
    for key, value in final.items():
        assert torch.equal(state[key], value), key


@pytest.mark.slow
def test_dist_train_detection_demo(scenes, tmp_path, monkeypatch):
    monkeypatch.setenv('PORT', str(free_port()))
    root = scenes / 'coco'
    ann = root / 'annotations' / 'instances_val.json'
    config = write_config(
        tmp_path / 'det.py',
        root,
        RECORD + f"val_evaluator = dict(ann_file='{ann}')\n"
        f"test_evaluator = dict(ann_file='{ann}')\n",
        base=DET_CONFIG)
    work_dir = tmp_path / 'work'
    # 1 epoch of 16 images, 4 per batch on each of 2 ranks: 2 iterations
    result = run_tool(
        'dist_train.sh', config, 2, '--work-dir', work_dir, '--cfg-options',
        'train_dataloader.batch_size=4', 'train_cfg.max_epochs=1',
        'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=1')
    assert result.returncode == 0
    check_ranks(work_dir, work_dir / 'epoch_1.pth', num_iters=2)


@pytest.mark.slow
def test_dist_train_segmentation_demo(scenes, tmp_path, monkeypatch):
    monkeypatch.setenv('PORT', str(free_port()))
    config = write_config(
        tmp_path / 'seg.py', scenes / 'ade', RECORD, base=SEG_CONFIG)
    work_dir = tmp_path / 'work'
    # 2 iterations of 4 images on each of 2 ranks: each image once
    result = run_tool(
        'dist_train.sh', config, 2, '--work-dir', work_dir, '--cfg-options',
        'train_dataloader.batch_size=4', 'train_cfg.max_iters=2',
        'train_cfg.val_interval=4', 'default_hooks.checkpoint.interval=2')
    assert result.returncode == 0
    check_ranks(work_dir, work_dir / 'iter_2.pth', num_iters=2)
