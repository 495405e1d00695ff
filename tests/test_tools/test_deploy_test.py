"""Deployed graphs scored on a config's test set
(:mod:`mmtnt.deploy.evaluate`, ``tools/deployment/test.py``).

* The fp32 graph's metrics equal those of ``tools/test.py`` on the same
  checkpoint, within float rounding, for the three tasks:

  - the tool tests' tiny classifier after its full run (``full_run``),
    against the session's ``tools/test.py`` run on it (``predictions``,
    shared with test_test.py): top-1 and every image's scores, for a
    graph of scores and one of logits;
  - a tiny segmentor (random weights) on images of three sizes, resized
    and padded by the test pipeline, in whole and sliding-window
    inference: the metrics and every predicted pixel;
  - the demo RetinaNet and Mask R-CNN of the session's short runs
    (``short_runs``, shared with test_dense_demo.py; their graphs with
    test_int8_tasks.py), on validation scenes
    resized to 112 pixels and padded to 128, so that boxes are clipped to
    the unpadded image, scaled back, and masks pasted at the original
    size: every COCO metric.
* Hand-made graphs that classify the tiny data set's dark and bright images
  perfectly: fixed batches other than the dataloader's, scores or logits,
  several graphs in one pass, the command line (its log line and JSON),
  and the errors that name what to fix (data path, annotation file, a
  graph of another task, channels or a fixed size that do not fit).
"""
import json
import pickle
import time

import numpy as np
import pytest
import torch
from demo_runs import short_run_graph, short_run_group
from mmengine.config import Config
from mmengine.registry import DefaultScope
from PIL import Image
from tool_utils import BASE_CONFIG, NUM_VAL, SEG_CONFIG, run_tool, write_config

from mmtnt.deploy import build_model, export_onnx
from mmtnt.deploy.evaluate import (DetectorPredictions, evaluate_graphs,
                                   evaluate_onnx, slide_logits)
from mmtnt.deploy.cli import evaluate_main as main

RETINANET = 'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
MASK_RCNN = 'configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py'
# Validation scenes scored (of 50), and the size the test pipeline resizes
# the 128x128 scenes to: the preprocessor pads it to 128 (a multiple of
# 32), the graph's fixed size.
DET_IMAGES = 16
DET_RESIZE = 112
# COCO metrics are rounded to 3 decimals.
COCO_ROUNDING = 1e-3
# The tiny segmentor's images (height, width), resized to fit in SEG_SIZE
# and padded to it; sliding windows of SEG_CROP every SEG_STRIDE pixels.
SEG_IMAGE_SIZES = [(40, 56), (50, 36), (44, 44)]
SEG_SIZE = 48
SEG_CROP = 32
SEG_STRIDE = 12
SEG_EXTRA = f"""
model = dict(data_preprocessor=dict(test_cfg=dict(size=({SEG_SIZE}, \
{SEG_SIZE}))))
test_dataloader['dataset']['pipeline'] = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=({SEG_SIZE}, {SEG_SIZE}), keep_ratio=True),
    dict(type='LoadAnnotations'), dict(type='PackSegInputs')]
"""
SLIDE_EXTRA = (f"model['test_cfg'] = dict(mode='slide', crop_size=("
               f'{SEG_CROP}, {SEG_CROP}), stride=({SEG_STRIDE}, '
               f'{SEG_STRIDE}))\n')


def dump_metric(cfg, out_file):
    """``cfg`` (a copy) whose test evaluator also dumps every prediction
    to ``out_file``, as ``tools/test.py --out`` does."""
    cfg = cfg.copy()
    metrics = cfg.test_evaluator
    metrics = list(metrics) if isinstance(metrics, list) else [metrics]
    cfg.test_evaluator = metrics + [
        dict(type='DumpResults', out_file_path=str(out_file))
    ]
    return cfg


def tool_metrics(config, checkpoint, work_dir, options=(), out=None):
    """``tools/test.py`` run as a user runs it; the metrics of its JSON."""
    args = ['test.py', config, checkpoint, '--work-dir', work_dir]
    args += ['--out', out] if out else []
    args += ['--cfg-options', *options] if options else []
    result = run_tool(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    logs = sorted(work_dir.glob('*/*.json'))
    return json.loads(logs[-1].read_text())


def load_dump(path):
    with open(path, 'rb') as f:
        return pickle.load(f)


# --- the classifier -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize('logits', [False, True])
def test_classifier_equals_test_tool(full_run, predictions, make_config,
                                     tmp_path, logits):
    """The graph of the full run's last checkpoint: the top-1 that
    tools/test.py logged, and each image's scores."""
    config = make_config('config.py')
    onnx_file = str(tmp_path / 'classifier.onnx')
    export_onnx(
        str(config),
        onnx_file, (32, 32),
        batch_size=4,
        logits=logits,
        checkpoint=str(full_run / 'epoch_4.pth'))
    cfg = dump_metric(Config.fromfile(config), tmp_path / 'preds.pkl')
    metrics = evaluate_onnx(cfg, onnx_file)
    expected = predictions['preds']
    assert f'accuracy/top1: {metrics["accuracy/top1"]:.4f}' in (
        predictions['output'])
    actual = load_dump(tmp_path / 'preds.pkl')
    assert len(actual) == len(expected) == NUM_VAL
    for mine, theirs in zip(actual, expected):
        assert mine['sample_idx'] == theirs['sample_idx']
        assert int(mine['pred_label']) == int(theirs['pred_label'])
        torch.testing.assert_close(
            mine['pred_score'], theirs['pred_score'], rtol=1e-4, atol=1e-6)


# --- the segmentor --------------------------------------------------------


@pytest.fixture(scope='module')
def seg_data(tmp_path_factory):
    """Noise images of :data:`SEG_IMAGE_SIZES` whose right halves are
    class 1."""
    root = tmp_path_factory.mktemp('seg_data')
    (root / 'img').mkdir()
    (root / 'ann').mkdir()
    rng = np.random.default_rng(0)
    for i, (height, width) in enumerate(SEG_IMAGE_SIZES):
        pixels = rng.integers(0, 256, (height, width, 3)).astype(np.uint8)
        label = np.zeros((height, width), np.uint8)
        label[:, width // 2:] = 1
        Image.fromarray(pixels).save(root / 'img' / f'{i}.png')
        Image.fromarray(label).save(root / 'ann' / f'{i}.png')
    return root


@pytest.mark.slow
@pytest.mark.parametrize('mode', ['whole', 'slide'])
def test_segmentor_equals_test_tool(seg_data, tmp_path, mode):
    """Random weights: the metrics and every predicted pixel of
    tools/test.py, padding cut and resized back to each image's size."""
    extra = SEG_EXTRA + (SLIDE_EXTRA if mode == 'slide' else '')
    config = write_config(tmp_path / 'seg.py', seg_data, extra, SEG_CONFIG)
    torch.manual_seed(0)
    model = build_model(str(config))
    checkpoint = tmp_path / 'seg.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, checkpoint)
    size = SEG_CROP if mode == 'slide' else SEG_SIZE
    onnx_file = str(tmp_path / 'seg.onnx')
    export_onnx(model, onnx_file, (size, size))
    cfg = dump_metric(Config.fromfile(config), tmp_path / 'onnx.pkl')
    metrics = evaluate_onnx(cfg, onnx_file)
    expected = tool_metrics(config, checkpoint, tmp_path / 'work',
                            out=tmp_path / 'torch.pkl')
    assert set(metrics) == {'aAcc', 'mIoU', 'mAcc'}
    for key, value in metrics.items():
        assert float(value) == pytest.approx(expected[key], abs=0.01), key
    for mine, theirs, size in zip(
            load_dump(tmp_path / 'onnx.pkl'),
            load_dump(tmp_path / 'torch.pkl'), SEG_IMAGE_SIZES):
        prediction = mine['pred_sem_seg']['data']
        assert prediction.shape == (1, *size)
        assert torch.equal(prediction, theirs['pred_sem_seg']['data'])


def test_slide_logits_average_the_windows():
    """Windows of a graph that returns its input's first channel
    reassemble the image; each pixel counted as often as covered."""

    class Echo:

        def run(self, _, feed):
            return [feed['input'][:, :1]]

        def get_inputs(self):
            return [type('Input', (), dict(shape=['N', 2, 'H', 'W']))]

    inputs = np.random.default_rng(0).random((2, 2, 13, 17), np.float32)
    logits = slide_logits(Echo(), inputs, (8, 8), (4, 6))
    torch.testing.assert_close(logits, torch.from_numpy(inputs[:, :1]))


# --- the detectors --------------------------------------------------------


def detector_test(config, scenes, short_runs, tmp_path_factory, tmp_path):
    """The metrics of the short run's graph and of tools/test.py on the
    first validation scenes, resized to :data:`DET_RESIZE`."""
    onnx_file, run, data = short_run_graph(config, scenes, short_runs,
                                           tmp_path_factory)
    checkpoint = run.checkpoint
    seconds = {}
    # the test pipeline's Resize (its second step), and fewer images
    subset = {
        'test_dataloader.dataset.indices': DET_IMAGES,
        'test_dataloader.num_workers': 0,
        'test_dataloader.persistent_workers': False,
        'test_dataloader.dataset.pipeline.1.scale': (DET_RESIZE, DET_RESIZE)
    }
    cfg_options = dict(option.split('=', 1) for option in data)
    start = time.monotonic()
    metrics = evaluate_onnx(
        config, onnx_file, cfg_options={
            **cfg_options,
            **subset
        })
    seconds['evaluate'] = time.monotonic() - start
    options = data + [
        f'{key}={value}'.replace(' ', '') for key, value in subset.items()
    ]
    start = time.monotonic()
    expected = tool_metrics(config, checkpoint, tmp_path / 'work', options)
    seconds['tools/test.py'] = time.monotonic() - start
    print(f'{config}: ONNX {metrics}, tools/test.py {expected}, seconds '
          f'{seconds}')
    for key, value in metrics.items():
        assert value == pytest.approx(expected[key], abs=COCO_ROUNDING), key
    return metrics


@pytest.mark.slow
@short_run_group(RETINANET)
def test_retinanet_equals_test_tool(demo_scenes, short_runs,
                                    tmp_path_factory, tmp_path):
    metrics = detector_test(RETINANET, demo_scenes, short_runs,
                            tmp_path_factory, tmp_path)
    assert metrics['coco/bbox_mAP_50'] > 0


@pytest.mark.slow
@short_run_group(MASK_RCNN)
def test_mask_rcnn_equals_test_tool(demo_scenes, short_runs,
                                    tmp_path_factory, tmp_path):
    metrics = detector_test(MASK_RCNN, demo_scenes, short_runs,
                            tmp_path_factory, tmp_path)
    assert metrics['coco/bbox_mAP_50'] > 0
    assert metrics['coco/segm_mAP_50'] > 0


def test_detections_in_the_original_image():
    """Boxes of an image resized by 0.5 scaled back; per-RoI masks pasted
    at the original size; masks pasted by the graph at the input size are
    refused for a resized image."""
    from mmdet.structures import DetDataSample
    predict = DetectorPredictions(
        Config(dict(model=dict(test_cfg=dict(rcnn=dict(
            mask_thr_binary=0.5))))))
    sample = DetDataSample(metainfo=dict(
        img_shape=(4, 6), ori_shape=(8, 12), scale_factor=(0.5, 0.5)))
    outputs = dict(
        boxes=np.array([[1., 1., 3., 4.]], np.float32),
        scores=np.array([0.9], np.float32),
        labels=np.array([2]))
    boxes = predict.rescaled(outputs, sample)['bboxes']
    assert boxes.tolist() == [[2., 2., 6., 8.]]
    masks = predict.rescaled(
        dict(outputs, roi_masks=np.ones((1, 28, 28), np.float32)),
        sample)['masks']
    assert masks.shape == (1, 8, 12) and masks.dtype == torch.bool
    assert masks[0, 2:8, 2:6].all() and masks.sum() == 6 * 4
    with pytest.raises(ValueError, match="needs a graph of the masks per "
                       "RoI \\('roi_masks'"):
        predict.rescaled(dict(outputs, masks=np.ones((1, 4, 6), bool)),
                         sample)
    unscaled = DetDataSample(metainfo=dict(
        img_shape=(4, 6), ori_shape=(4, 6), scale_factor=(1., 1.)))
    masks = np.zeros((1, 4, 6), bool)
    masks[0, 1:3, 2:4] = True
    assert torch.equal(
        predict.rescaled(dict(outputs, masks=masks), unscaled)['masks'],
        torch.from_numpy(masks))


# --- hand-made graphs: the loop, the command line, the errors -------------


def brightness_graph(path, shape=('N', 3, 'H', 'W'), output='logits'):
    """An ONNX classifier of the tiny data set: logits ``(-m, m)`` of each
    image's mean ``m`` (normalised: below 0 for the dark ``class_a``,
    above for the bright ``class_b``), or their softmax (``'scores'``)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes = [
        helper.make_node(
            'ReduceMean', ['input'], ['mean'], axes=[1, 2, 3], keepdims=1),
        helper.make_node('Flatten', ['mean'], ['flat'], axis=1),
        helper.make_node('Mul', ['flat', 'signs'], ['logits'])
    ]
    if output == 'scores':
        nodes.append(helper.make_node('Softmax', ['logits'], ['scores']))
    signs = numpy_helper.from_array(np.array([[-1, 1]], np.float32), 'signs')
    graph = helper.make_graph(
        nodes, 'brightness',
        [helper.make_tensor_value_info('input', TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT,
                                       [shape[0], 2])], [signs])
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)]),
        str(path))
    return str(path)


def test_graph_batches_and_outputs(make_config, tmp_path):
    """Dynamic, single-image and 3-image graphs, of scores or of logits,
    scored in one pass over batches of 4 (a 3-image graph's second part
    filled up): every image right."""
    graphs = {
        f'{output}-{batch}':
        brightness_graph(
            tmp_path / f'{output}-{batch}.onnx', (batch, 3, 32, 32),
            output=output)
        for output in ('logits', 'scores') for batch in ('N', 1, 3)
    }
    scope = DefaultScope.get_current_instance()
    metrics = evaluate_graphs(make_config('config.py'), graphs, num_threads=1)
    assert metrics == dict.fromkeys(graphs, {'accuracy/top1': 100.0})
    assert DefaultScope.get_current_instance() is scope  # none left behind


def test_num_images(make_config, tmp_path):
    cfg = dump_metric(
        Config.fromfile(make_config('config.py')), tmp_path / 'preds.pkl')
    evaluate_onnx(cfg, brightness_graph(tmp_path / 'graph.onnx'),
                  num_images=3)
    assert len(load_dump(tmp_path / 'preds.pkl')) == 3


def test_command_line(make_config, tmp_path, capsys):
    """``tools/deployment/test.py``'s main logs the metrics as
    tools/test.py and writes them to WORK_DIR/TIMESTAMP/TIMESTAMP.json."""
    graph = brightness_graph(tmp_path / 'graph.onnx')
    metrics = main([
        str(make_config('config.py')), graph, '--threads', '1',
        '--work-dir',
        str(tmp_path / 'work'), '--cfg-options', 'test_dataloader.batch_size=3'
    ])
    assert metrics == {'accuracy/top1': 100.0}
    out = capsys.readouterr().out
    assert 'Epoch(test) [3/3]    accuracy/top1: 100.0000  data_time: ' in out
    logs = list((tmp_path / 'work').glob('*/*.json'))
    assert len(logs) == 1
    assert json.loads(logs[0].read_text()) == metrics
    assert 'accuracy/top1: 100.0000' in logs[0].with_suffix(
        '.log').read_text()


def test_command_line_errors(make_config, tmp_path):
    config = str(make_config('config.py'))
    with pytest.raises(SystemExit, match='ONNX file not found: .*x.onnx'):
        main([config, str(tmp_path / 'x.onnx')])


def test_errors_name_what_to_fix(make_config, tmp_path, data_root):
    config = str(make_config('config.py'))
    graph = brightness_graph(tmp_path / 'graph.onnx')
    # the tiny config's own data_root, which does not exist
    with pytest.raises(FileNotFoundError,
                       match='test_dataloader.dataset.data_root'):
        evaluate_onnx(str(BASE_CONFIG), graph)
    with pytest.raises(FileNotFoundError, match=r'test_evaluator\.ann_file'):
        evaluate_onnx(
            config,
            graph,
            cfg_options={'test_evaluator.ann_file': str(tmp_path / 'a.json')})
    one_channel = brightness_graph(tmp_path / 'gray.onnx', ('N', 1, 32, 32))
    with pytest.raises(ValueError, match='takes 1-channel images, but the '
                       "config's data preprocessor gives 3"):
        evaluate_onnx(config, one_channel)
    small = brightness_graph(tmp_path / 'small.onnx', ('N', 3, 16, 16))
    with pytest.raises(ValueError, match='takes 16x16 images .* gives 32x32'):
        evaluate_onnx(config, small)
    with pytest.raises(ValueError, match="outputs are \\['logits'\\], not "
                       'those of a segmentor graph'):
        evaluate_onnx(str(SEG_CONFIG), graph,
                      cfg_options={'test_dataloader.dataset.data_root':
                                   str(data_root)})
    with pytest.raises(ValueError, match="default_scope must be"):
        evaluate_onnx(config, graph, cfg_options={'default_scope': 'mmocr'})
