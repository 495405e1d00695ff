"""Shortened runs of the detection and segmentation demos (configs/demo/).

The demo scenes are built with ``tools/dataset_converters/
make_demo_scenes.py`` into a temporary folder; each demo then trains
briefly through ``tools/train.py`` and is tested through ``tools/test.py``.
A detector's bbox AP50 must end well above that of the same model
untrained, which is 0: measured through the same tools after one training
iteration with a learning rate of 0 (the weights stay as initialised), both
demos scored 0.000 (that run cost 40 s of the suite and is no longer made).
A segmentor's mIoU must end
well above that of predicting the majority class everywhere, which scores
far more than an untrained model (the scene behind the items covers most
pixels).

The tools run as a user runs them: subprocesses of the interpreter running
the tests, from the repository root. The short runs are the session's
(``short_runs``): the image demo tests predict with the same models.
"""
import re

import numpy as np
import pytest
import torch
from demo_runs import (SHORT_EPOCHS_MASK_RCNN, SHORT_EPOCHS_RETINANET,
                       SHORT_ITERS_UPERNET, data_options, describe, run_tool,
                       short_epochs, short_iters, short_run_group)

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

# The segmentation demo whose learning the default run checks: the one the
# other tests predict with and export. The others take about 3 minutes each
# on 2 cores (their 600 iterations cannot be cut: at 500 the TNT demo is
# still at mIoU 27.8, under the bar of 32.1), so they are ``long`` tests,
# which ``make test-long`` runs.
DEFAULT_RUN_UPERNETS = ('PCPVT', )

# How far each short run (``demo_runs``) must end above the untrained
# detector (``UNTRAINED_AP50``), and above predicting the majority class
# (the scene) everywhere for a segmentor: more than telling the items from
# the scene perfectly but as one class would give (10.6 mIoU points on the
# demo scenes).
MARGIN_AP50 = 0.2  # COCO bbox AP at IoU 0.5, 0..1
MARGIN_MIOU = 15.0  # mmseg's mIoU, in percent
# bbox AP50 of both demo detectors untrained (see the module docstring).
UNTRAINED_AP50 = 0.0


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


def read_label_maps(scenes, split):
    """The label maps of the ADE20K demo scenes of ``split``
    (``'training'`` or ``'validation'``) as the configs' pipelines load
    them (``reduce_zero_label``: "other" becomes 255, ignored)."""
    from mmseg.datasets.transforms import LoadAnnotations
    load = LoadAnnotations()  # reduce_zero_label as the dataset gives it
    paths = sorted((scenes / 'ade' / 'annotations' / split).glob('*.png'))
    assert paths, f'no label maps in {scenes}'
    return [
        load(dict(seg_map_path=str(path), reduce_zero_label=True,
                  seg_fields=[]))['gt_seg_map'] for path in paths
    ]


def majority_miou(scenes, num_classes=5, ignore_index=255):
    """mmseg's mIoU (``IoUMetric``), in percent, on the validation scenes
    of predicting everywhere the class with the most training pixels."""
    from mmseg.evaluation import IoUMetric
    counts = sum(
        np.bincount(label[label != ignore_index].ravel(),
                    minlength=num_classes)
        for label in read_label_maps(scenes, 'training'))
    majority = int(counts.argmax())
    areas = [
        IoUMetric.intersect_and_union(
            torch.full(label.shape, majority), torch.from_numpy(label),
            num_classes, ignore_index)
        for label in read_label_maps(scenes, 'validation')
    ]
    totals = [sum(area[i] for area in areas) for i in range(4)]
    iou = IoUMetric.total_area_to_metrics(*totals, metrics=['mIoU'])['IoU']
    return round(float(np.nanmean(iou)) * 100, 2)


def check_detector_learns(config, scenes, short_runs, tmp_path, epochs,
                          name):
    """Test ``config`` after its first ``epochs``; assert bbox AP50 gained
    ``MARGIN_AP50`` over the untrained model's."""
    data = data_options(config, scenes)
    pattern = r'coco/bbox_mAP_50: ([0-9.]+)'
    before = UNTRAINED_AP50
    short = short_runs.train(config, data + short_epochs(epochs))
    after, test_time = evaluate(config, scenes, short.checkpoint, tmp_path,
                                pattern)
    print(f'{name}: untrained {before:.3f}, after the short run {after:.3f} '
          f'(train {short.seconds:.0f} s, test {test_time:.0f} s)')
    assert after >= before + MARGIN_AP50, (
        f'{name} went from {before:.3f} untrained to only {after:.3f}; '
        f'{MARGIN_AP50} more was expected')


@pytest.mark.slow
@short_run_group(RETINANET)
def test_retinanet_demo_learns(demo_scenes, short_runs, tmp_path):
    check_detector_learns(RETINANET, demo_scenes, short_runs, tmp_path,
                          SHORT_EPOCHS_RETINANET, 'RetinaNet bbox AP50')


@pytest.mark.slow
@short_run_group(MASK_RCNN)
def test_mask_rcnn_demo_learns(demo_scenes, short_runs, tmp_path):
    check_detector_learns(MASK_RCNN, demo_scenes, short_runs, tmp_path,
                          SHORT_EPOCHS_MASK_RCNN, 'Mask R-CNN bbox AP50')


@pytest.mark.slow
@pytest.mark.parametrize('backbone', [
    pytest.param(name, marks=[short_run_group(UPERNETS[name])] +
                 ([] if name in DEFAULT_RUN_UPERNETS else [pytest.mark.long]))
    for name in UPERNETS
])
def test_upernet_demo_learns(backbone, demo_scenes, short_runs, tmp_path):
    config = UPERNETS[backbone]
    majority = majority_miou(demo_scenes)
    short = short_runs.train(
        config,
        data_options(config, demo_scenes) + short_iters(SHORT_ITERS_UPERNET))
    after, test_time = evaluate(config, demo_scenes, short.checkpoint,
                                tmp_path, r'mIoU: ([0-9.]+)')
    print(f'UperNet ({backbone}) mIoU: the majority class {majority:.2f}, '
          f'after the short run {after:.2f} (train {short.seconds:.0f} s, '
          f'test {test_time:.0f} s)')
    assert after >= majority + MARGIN_MIOU, (
        f'UperNet ({backbone}) reached mIoU {after:.2f}, only '
        f'{after - majority:.2f} above predicting the majority class '
        f'({majority:.2f}); {MARGIN_MIOU} more was expected')
