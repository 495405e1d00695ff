"""benchmarks.dense_benchmark and benchmarks.dense: the table on known step
times (with_cp rows, schedules, GPU-hours), the train step, schedules and
sizes, random targets, bad input."""
import math
from types import SimpleNamespace

import pytest
import torch
from tool_utils import REPO

from benchmarks import dense, dense_benchmark
from benchmarks.dense_benchmark import main as dense_benchmark_main

DEMO_DET = 'configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py'
DEMO_SEG = 'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
MMSEG_SVT = 'mmseg::twins/twins_svt-s_uperhead_8xb2-160k_ade20k-512x512.py'
MASK_RCNN_SVT = 'configs/twins/mask-rcnn_twins-svt-s_fpn_1x_coco.py'
UPERNET_SVT = 'configs/twins/upernet_twins-svt-s_8xb2-160k_ade20k-512x512.py'
UPERNET_PCPVT = (
    'configs/twins/upernet_twins-pcpvt-s_8xb4-160k_ade20k-512x512.py')
MASK_RCNN_3X = 'configs/twins/mask-rcnn_twins-svt-s_fpn_ms-crop-3x_coco.py'


def table_rows(stdout):
    """The rows of the printed Markdown table, as dicts by column."""
    lines = [line for line in stdout.splitlines() if line.startswith('| ')]
    header, *rows = [[cell.strip() for cell in line.strip('|').split('|')]
                     for line in lines]
    return [dict(zip(header, row)) for row in rows]


class ScriptedRun(SimpleNamespace):
    """A :class:`~benchmarks.dense.DenseRun` that builds nothing; its
    steps take 0.25 s with_cp and 0.5 s without, by the scripted clock."""

    def __init__(self, name, cfg, img_size, batch_size, device,
                 with_cp=False, cpu_accel=True, seed=0):
        super().__init__(
            label=dense.config_label(name),
            backbone=dense.backbone_label(cfg),
            img_size=img_size,
            batch_size=batch_size,
            with_cp=with_cp,
            seconds=0.25 if with_cp else 0.5)

    def step(self):
        return {}


def test_table_has_every_config_with_and_without_cp(monkeypatch, tmp_path):
    monkeypatch.setattr(dense_benchmark, 'DenseRun', ScriptedRun)
    monkeypatch.setattr(
        dense_benchmark, 'step_measurer',
        lambda run, device, memory: lambda: (run.seconds, 0))
    out = tmp_path / 'dense.md'
    dense_benchmark_main([
        DEMO_DET, DEMO_SEG, MMSEG_SVT, '--img-size', '64', '--batch-size',
        '2', '--warmup', '1', '--rounds', '2', '--with-cp', 'both',
        '--modes', 'train', '--default-malloc', '--train-images', '64',
        '--out', str(out)
    ])
    text = out.read_text()
    rows = table_rows(text)
    assert [(row['config'], row['backbone'], row['with_cp'])
            for row in rows] == [
        ('mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco', 'mmtnt.SVT', 'off'),
        ('mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco', 'mmtnt.SVT', 'on'),
        ('upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128', 'mmtnt.PCPVT',
         'off'),
        ('upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128', 'mmtnt.PCPVT', 'on'),
        ('mmseg::twins_svt-s_uperhead_8xb2-160k_ade20k-512x512',
         'mmseg.SVT', 'off'),
    ]
    assert ('mmseg::twins_svt-s_uperhead_8xb2-160k_ade20k-512x512: '
            'mmseg.SVT takes no with_cp' in text)
    # 20 epochs of ceil(64 / 8) steps on 1 GPU; 2000 steps on 1 GPU; 160k
    # steps on 8 GPUs. The steps of 2 images count for the per-GPU
    # batches of 8, 8 and 2.
    assert [(row['train step'], row['schedule'],
             row['device-hours (lower bound)']) for row in rows] == [
        ('500 ms', '20 ep x 8 it, 1 GPU x 8', '0.0889'),
        ('250 ms', '20 ep x 8 it, 1 GPU x 8', '0.0444'),
        ('500 ms', '2000 it, 1 GPU x 8', '1.11'),
        ('250 ms', '2000 it, 1 GPU x 8', '0.556'),
        ('500 ms', '160000 it, 8 GPUs x 2', '178'),
    ]
    assert all(row['input'] == '64x64' and row['batch'] == '2'
               for row in rows)


def test_steps_are_measured_in_interleaved_rounds(monkeypatch):
    clock = iter(range(100))
    runs = [SimpleNamespace(step=lambda: None) for _ in range(2)]
    monkeypatch.setattr(dense_benchmark, 'timed',
                        lambda step, device: next(clock))
    measured = dense_benchmark.measure_interleaved(
        runs, torch.device('cpu'), warmup=1, rounds=2, memory=False)
    # Warm-ups 0, 1; round 0: run 0, run 1; round 1: run 1, run 0.
    assert measured == [[(2, 0), (5, 0)], [(3, 0), (4, 0)]]


@pytest.mark.parametrize('config', [DEMO_DET, DEMO_SEG])
def test_train_step_updates_the_weights_with_finite_losses(config):
    cfg = dense.load_dense_config(str(REPO / config))
    run = dense.DenseRun(config, cfg, (64, 64), 1, torch.device('cpu'),
                         with_cp=True)
    assert run.model.backbone.with_cp
    before = {
        name: param.detach().clone()
        for name, param in run.model.named_parameters()
    }
    losses = run.step()
    assert 'loss' in losses
    assert all(torch.isfinite(value).all() for value in losses.values())
    changed = {
        name: not torch.equal(before[name], param)
        for name, param in run.model.named_parameters()
    }
    assert all(changed[name] for name in changed if name.startswith(
        'backbone.'))
    assert sum(changed.values()) > 0.9 * len(changed)


def schedule(config):
    """The :class:`~benchmarks.dense.Schedule` of a config."""
    return dense.Schedule(dense.load_dense_config(config), config)


def test_schedules_and_sizes_of_the_published_configs():
    svt_det = schedule(MASK_RCNN_SVT)
    # 12 epochs of ceil(118287 / 16) = 7393 steps, 8 GPUs x 2 images.
    assert (svt_det.iterations, svt_det.gpus, svt_det.per_gpu_batch) == (
        12 * 7393, 8, 2)
    assert svt_det.gpu_hours(0.5, 2) == pytest.approx(
        12 * 7393 * 0.5 * 8 / 3600)
    # A step of one image counts twice for the 2 images per GPU.
    assert svt_det.gpu_hours(0.5, 1) == pytest.approx(
        2 * svt_det.gpu_hours(0.5, 2))
    svt_3x = schedule(MASK_RCNN_3X)
    assert svt_3x.iterations == 36 * 7393
    pcpvt = schedule(UPERNET_PCPVT)
    assert (pcpvt.iterations, pcpvt.gpus,
            pcpvt.per_gpu_batch) == (160000, 8, 4)
    assert pcpvt.text == '160000 it, 8 GPUs x 4'
    assert schedule(DEMO_DET).gpu_hours(1, 8) is None
    for config, size in [(MASK_RCNN_SVT, (800, 1333)),
                         (MASK_RCNN_3X, (800, 1333)),
                         (UPERNET_SVT, (512, 512)), (MMSEG_SVT, (512, 512)),
                         (DEMO_DET, (128, 128)), (DEMO_SEG, (128, 128))]:
        assert dense.train_input_size(dense.load_dense_config(config)) == size


def test_backbones_with_cp_and_labels():
    mmseg_cfg = dense.load_dense_config(MMSEG_SVT)
    mmtnt_cfg = dense.load_dense_config(UPERNET_SVT)
    assert dense.backbone_label(mmseg_cfg) == 'mmseg.SVT'
    assert dense.backbone_label(mmtnt_cfg) == 'mmtnt.SVT'
    assert not dense.backbone_takes_with_cp(mmseg_cfg)
    assert dense.backbone_takes_with_cp(mmtnt_cfg)
    mmseg_schedule = dense.Schedule(mmseg_cfg, MMSEG_SVT)
    assert (mmseg_schedule.iterations, mmseg_schedule.gpus) == (160000, 8)


def test_random_targets_are_valid():
    generator = torch.Generator().manual_seed(0)
    batch = dense.detection_batch((60, 90), 2, 80, True, generator)
    for sample in batch['data_samples']:
        boxes = sample.gt_instances.bboxes.tensor
        assert (boxes[:, :2] >= 0).all()
        assert (boxes[:, 2:] > boxes[:, :2]).all()
        assert (boxes[:, 2] <= 90).all() and (boxes[:, 3] <= 60).all()
        masks = torch.from_numpy(sample.gt_instances.masks.masks)
        for box, mask in zip(boxes.int(), masks):
            x1, y1, x2, y2 = box.tolist()
            assert mask.sum() == (x2 - x1) * (y2 - y1)
            assert mask[y1:y2, x1:x2].all()
        assert sample.gt_instances.labels.max() < 80
    batch = dense.segmentation_batch((64, 64), 1, 150, generator)
    labels = batch['data_samples'][0].gt_sem_seg.data
    ignored = labels == dense.IGNORE_INDEX
    assert labels[~ignored].max() < 150
    assert math.isclose(ignored.float().mean(), dense.IGNORED_FRACTION,
                        abs_tol=0.02)


@pytest.mark.parametrize('args, message', [
    (['configs/tnt/tnt-s-p16_16xb64_in1k.py'],
     "default_scope 'mmpretrain' is none of ['mmdet', 'mmseg']"),
    (['configs/none.py'], 'config file not found'),
    (['mmseg::twins/none.py'], 'config not found'),
    ([DEMO_SEG, '--img-size', '1', '2', '3'], '--img-size takes H or H W'),
    ([DEMO_SEG, '--warmup', '0'], '--warmup must be positive'),
    ([DEMO_SEG, '--amp', '--amp-dtype', 'float16'], 'bfloat16 only'),
])
def test_bad_input_says_what_is_wrong(capsys, args, message):
    with pytest.raises(SystemExit) as error:
        dense_benchmark_main(args)
    assert message in str(error.value) + capsys.readouterr().err
