"""demo/image_demo.py on short-trained demo models of the three tasks.

The demo models are the session's short runs (``short_runs``), which
``test_demo.py`` and ``test_dense_demo.py`` check learn;
``tools/test.py --out`` predicts on the first validation images and
``demo/image_demo.py`` on the same images, saved as files. The two must
agree, and the drawn pictures must have the images' size and show the
predictions.
"""
import json
import os.path as osp
import pickle
import shutil

import mmcv
import numpy as np
import pytest
from demo_runs import (SHORT_EPOCHS_MASK_RCNN, SHORT_ITERS_UPERNET,
                       data_options, describe, run_tool, short_epochs,
                       short_fashion_mnist_run, short_iters, short_run_group)
from pycocotools import mask as mask_utils

CLASSIFIER = 'configs/demo/tnt-demo_1xb128_fashion-mnist.py'
DETECTOR = 'configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py'
SEGMENTOR = 'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
NUM_IMAGES = 4


def predict_with_test_tool(config, checkpoint, work_dir, options):
    """``tools/test.py --out`` on the first ``NUM_IMAGES`` test images."""
    out = work_dir / 'test_preds.pkl'
    test, _ = run_tool([
        'tools/test.py', config, checkpoint, '--work-dir',
        str(work_dir), '--out',
        str(out), '--cfg-options',
        f'test_dataloader.dataset.indices={NUM_IMAGES}', *options
    ],
                       timeout=300)
    assert test.returncode == 0, describe(test)
    with open(out, 'rb') as f:
        return pickle.load(f)


def run_demo(images, config, checkpoint, out_dir, *options):
    """Run demo/image_demo.py on a folder; its printed output."""
    result, _ = run_tool([
        'demo/image_demo.py',
        str(images), config, checkpoint, '--out-dir',
        str(out_dir), *options
    ],
                         timeout=300)
    assert result.returncode == 0, describe(result)
    return result.stdout


def read_summary(out_dir, name):
    with open(out_dir / 'preds' / f'{name}.json') as f:
        return json.load(f)


def check_picture(out_dir, name, image, drawn=True):
    """The drawn picture has the image's size, is not blank and, when
    ``drawn``, is not the image unchanged."""
    picture = mmcv.imread(str(out_dir / 'vis' / f'{name}.png'))
    original = mmcv.imread(str(image))
    assert picture.shape == original.shape, (picture.shape, original.shape)
    assert picture.std() > 5, 'the picture is blank'
    changed = np.abs(picture.astype(int) - original.astype(int)).max(-1)
    assert ((changed > 30).mean() > 0.001) == drawn, f'drawn: {drawn}'


def copy_images(preds, folder):
    """Copy the images ``tools/test.py`` predicted on into ``folder``."""
    folder.mkdir()
    paths = []
    for pred in preds:
        paths.append(folder / osp.basename(pred['img_path']))
        shutil.copy(pred['img_path'], paths[-1])
    return paths


def dense_demo_and_test_tool(config, schedule, demo_scenes, short_runs,
                             work_dir, *demo_options):
    """The short run of a dense demo, trained with ``schedule`` on the demo
    scenes, predicting on the first ``NUM_IMAGES`` validation images with
    ``tools/test.py`` and with the demo.

    Returns:
        tuple[list[dict], list[Path], Path, str]: What ``tools/test.py``
        predicted, the images, the demo's output folder and what it
        printed.
    """
    data = data_options(config, demo_scenes)
    checkpoint = short_runs.train(config, data + schedule).checkpoint
    preds = predict_with_test_tool(config, checkpoint, work_dir, data)
    images = copy_images(preds, work_dir / 'images')
    out_dir = work_dir / 'demo'
    printed = run_demo(work_dir / 'images', config, checkpoint, out_dir,
                       *demo_options)
    return preds, images, out_dir, printed


@pytest.mark.slow
@short_run_group(CLASSIFIER)
def test_classification(fashion_mnist, short_runs, tmp_path):
    from mmpretrain.datasets import FashionMNIST
    checkpoint = short_runs.train(CLASSIFIER,
                                  short_fashion_mnist_run()).checkpoint
    preds = predict_with_test_tool(CLASSIFIER, checkpoint, tmp_path, [])
    # the same test images, as the grayscale PNGs a user would have
    dataset = FashionMNIST(fashion_mnist, split='test', test_mode=True)
    images = tmp_path / 'images'
    images.mkdir()
    for i in range(NUM_IMAGES):
        mmcv.imwrite(dataset.get_data_info(i)['img'], str(images / f'{i}.png'))

    out_dir = tmp_path / 'demo'
    printed = run_demo(images, CLASSIFIER, checkpoint, out_dir, '--topk', '3')
    for i, pred in enumerate(preds):
        summary = read_summary(out_dir, str(i))
        scores = pred['pred_score'].numpy()
        expected = np.argsort(-scores)[:3]
        assert [p['label'] for p in summary['topk']] == expected.tolist()
        np.testing.assert_allclose([p['score'] for p in summary['topk']],
                                   scores[expected],
                                   atol=1e-5)
        assert summary['topk'][0]['cls'] == dataset.CLASSES[expected[0]]
        assert f'{summary["topk"][0]["cls"]}: ' in printed
        check_picture(out_dir, str(i), images / f'{i}.png')


@pytest.mark.slow
@short_run_group(DETECTOR)
def test_detection(demo_scenes, short_runs, tmp_path):
    # every detection test.py keeps (its own score threshold is 0.05)
    preds, images, out_dir, printed = dense_demo_and_test_tool(
        DETECTOR, short_epochs(SHORT_EPOCHS_MASK_RCNN), demo_scenes,
        short_runs, tmp_path, '--score-thr', '0')
    assert 'detections' in printed
    found = 0
    for pred, image in zip(preds, images):
        name = image.stem
        instances = read_summary(out_dir, name)['instances']
        expected = pred['pred_instances']
        assert len(instances) == len(expected['scores'])
        boxes = expected['bboxes'].numpy()
        labels = expected['labels'].numpy()
        for instance in instances:
            # the test detection of the same class nearest to this one, by
            # box (a trained detector may give one object several classes)
            distance = np.abs(boxes - np.array(instance['box'])).max(1)
            distance[labels != instance['label']] = np.inf
            j = int(distance.argmin())
            assert distance[j] < 0.2, (instance, boxes, labels)
            score = float(expected['scores'][j])
            assert abs(instance['score'] - score) < 1e-3
            # tools/test.py dumps masks run-length encoded
            area = mask_utils.area(expected['masks'][j])
            assert abs(instance['mask_area'] - area) <= 2
        found += len(instances)
        check_picture(out_dir, name, image, drawn=bool(instances))
    assert found > 0, 'the short-trained detector found nothing to compare'


@pytest.mark.slow
@short_run_group(SEGMENTOR)
def test_segmentation(demo_scenes, short_runs, tmp_path):
    preds, images, out_dir, printed = dense_demo_and_test_tool(
        SEGMENTOR, short_iters(SHORT_ITERS_UPERNET), demo_scenes, short_runs,
        tmp_path)
    for pred, image in zip(preds, images):
        name = image.stem
        expected = pred['pred_sem_seg']['data'][0].numpy()
        label_map = mmcv.imread(
            str(out_dir / 'preds' / f'{name}.png'), flag='unchanged')
        assert label_map.shape == expected.shape
        assert (label_map == expected).mean() > 0.999
        summary = read_summary(out_dir, name)
        assert abs(sum(c['fraction'] for c in summary['classes']) - 1) < 1e-6
        assert f'{summary["classes"][0]["cls"]}: ' in printed
        check_picture(out_dir, name, image)
