"""Shortened runs of the detection and segmentation demos (configs/demo/).

The demo scenes are built with ``tools/dataset_converters/
make_demo_scenes.py`` into a temporary folder; each demo then trains
briefly through ``tools/train.py`` and is tested through ``tools/test.py``.
Its metric must end well above that of the same model untrained, which is
tested the same way after one training iteration with a learning rate of
0 (the weights stay as initialised).

The tools run as a user runs them: subprocesses of the interpreter running
the tests, from the repository root. The short runs are the session's
(``short_runs``): the image demo tests predict with the same models.
"""
import re

import pytest
from demo_runs import (SHORT_EPOCHS_MASK_RCNN, SHORT_EPOCHS_RETINANET,
                       SHORT_ITERS_UPERNET, data_options, describe, run_tool,
                       short_epochs, short_iters)

RETINANET = 'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
MASK_RCNN = 'configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py'
# The segmentation demo of each family: the same data, heads and schedule.
UPERNETS = {
    'PCPVT': 'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py',
    'PyramidTNT':
    'configs/demo/upernet_pyramid-tnt-demo_1xb8-2k_demo-ade-128x128.py',
    'TNT': 'configs/demo/upernet_tnt-demo_feature-pyramid_1xb8-2k_demo-ade-'
    '128x128.py',
}

# How far above the untrained model each short run (``demo_runs``) must end.
MARGIN_AP50 = 0.2  # COCO bbox AP at IoU 0.5, 0..1
MARGIN_MIOU = 10.0  # mmseg's mIoU, in percent


def evaluate(config, scenes, checkpoint, work_dir, pattern):
    """``tools/test.py`` on ``checkpoint``; the metric ``pattern`` finds
    in its output and the testing time in seconds."""
    data = data_options(config, scenes)
    test, test_time = run_tool([
        'tools/test.py', config, checkpoint, '--work-dir',
        str(work_dir), '--cfg-options', *data
    ],
                               timeout=300)
    assert test.returncode == 0, describe(test)
    output = test.stdout + test.stderr
    found = re.findall(pattern, output)
    if not found and 'results of the whole dataset is empty' in output:
        # mmdet's CocoMetric: no detection above the score threshold
        return 0.0, test_time
    assert found, describe(test)
    return float(found[-1]), test_time


def untrained_options(by_epoch):
    """Options of a run that saves the model as initialised: one
    iteration with a learning rate of 0."""
    options = [
        'optim_wrapper.optimizer.lr=0.0', 'train_dataloader.batch_size=2'
    ]
    if by_epoch:
        return options + [
            'train_dataloader.dataset.indices=2', 'train_cfg.max_epochs=1',
            'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=1'
        ]
    return options + [
        'train_cfg.max_iters=1', 'train_cfg.val_interval=2',
        'default_hooks.checkpoint.interval=1'
    ]


def check_learns(config, scenes, short_runs, tmp_path, short_options,
                 by_epoch, pattern, margin, name):
    """Test ``config`` untrained and shortly trained; assert the margin."""
    data = data_options(config, scenes)
    untrained = short_runs.train(config, data + untrained_options(by_epoch))
    before, _ = evaluate(config, scenes, untrained.checkpoint,
                         tmp_path / 'untrained', pattern)
    short = short_runs.train(config, data + short_options)
    after, test_time = evaluate(config, scenes, short.checkpoint,
                                tmp_path / 'short', pattern)
    print(f'{name}: untrained {before:.3f}, after the short run {after:.3f} '
          f'(train {short.seconds:.0f} s, test {test_time:.0f} s)')
    assert after >= before + margin, (
        f'{name} went from {before:.3f} untrained to only {after:.3f}; '
        f'{margin} more was expected')


@pytest.mark.slow
def test_retinanet_demo_learns(demo_scenes, short_runs, tmp_path):
    check_learns(
        RETINANET,
        demo_scenes,
        short_runs,
        tmp_path,
        short_epochs(SHORT_EPOCHS_RETINANET),
        by_epoch=True,
        pattern=r'coco/bbox_mAP_50: ([0-9.]+)',
        margin=MARGIN_AP50,
        name='RetinaNet bbox AP50')


@pytest.mark.slow
def test_mask_rcnn_demo_learns(demo_scenes, short_runs, tmp_path):
    check_learns(
        MASK_RCNN,
        demo_scenes,
        short_runs,
        tmp_path,
        short_epochs(SHORT_EPOCHS_MASK_RCNN),
        by_epoch=True,
        pattern=r'coco/bbox_mAP_50: ([0-9.]+)',
        margin=MARGIN_AP50,
        name='Mask R-CNN bbox AP50')


@pytest.mark.slow
@pytest.mark.parametrize('backbone', list(UPERNETS))
def test_upernet_demo_learns(backbone, demo_scenes, short_runs, tmp_path):
    check_learns(
        UPERNETS[backbone],
        demo_scenes,
        short_runs,
        tmp_path,
        short_iters(SHORT_ITERS_UPERNET),
        by_epoch=False,
        pattern=r'mIoU: ([0-9.]+)',
        margin=MARGIN_MIOU,
        name=f'UperNet ({backbone}) mIoU')
