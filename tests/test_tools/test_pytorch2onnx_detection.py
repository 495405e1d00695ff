"""Checks of the detector export of :mod:`mmtnt.deploy` and of
``tools/deployment/pytorch2onnx.py``.

* The demo RetinaNet and Mask R-CNN after their short runs (the session's
  ``short_runs``, shared with ``test_dense_demo.py``), exported through the
  tool with ``--dynamic-export --verify`` as a user does: ONNX Runtime
  finds what mmdet's own ``predict`` finds in a demo scene, at the export
  size and at two sizes the export did not see, and in the smaller of
  those padded to a multiple of 32 with its ``img_shape`` fed.
* One full-width config per family (the published RetinaNet, fewer blocks)
  with random weights, exported and verified in-process the same way
  (``export_onnx``, ``verify_onnx``).
  Their final classification layers are rescaled first
  (:func:`spread_scores`): as initialised, every score lies
  within about 1e-5 of the others, below the score threshold, and NMS
  between boxes whose scores differ by less than the float noise of two
  runtimes (about 1e-7) may keep either box.
* That verify fails where it should: a graph without NMS, and detections
  that are perturbed, missing or relabelled; near-equal scores in another
  order are matched and counted.
* That the graph clips boxes to, and sizes masks as, the unpadded image of
  a padded input, as mmdet does.
* That a detector is exported and checked on one image only.
"""
import re

import numpy as np
import pytest
import torch
import torchvision
from demo_runs import (SHORT_EPOCHS_MASK_RCNN, SHORT_EPOCHS_RETINANET,
                       data_options, describe, run_tool, short_epochs,
                       short_run_group)
from mmengine.config import Config

from mmtnt.deploy import (build_model, export_graph, export_onnx,
                          graph_detections, match_detections, padded_check,
                          verify_onnx, verify_sizes)
from mmtnt.deploy.verify_detection import (detector_input, eager_detections,
                                           pad_input)
from mmtnt.models import SVT, TNT, PyramidTNT

RETINANET = 'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
MASK_RCNN = 'configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py'
DEMO_EPOCHS = {RETINANET: SHORT_EPOCHS_RETINANET,
               MASK_RCNN: SHORT_EPOCHS_MASK_RCNN}
# One full-width detector per family: the published RetinaNet configs,
# whose export costs less than a Mask R-CNN's (the demo Mask R-CNN checks
# that graph), with fewer of the same blocks: every kind of block, width,
# head count and window of the arch is there. The export's time goes into
# torch.export's symbolic sizes (sympy), op by op (the attention in parts
# is one traced operator, mmtnt::attention_in_parts, or it would dominate):
# each test took 24-75 s alone on 2 cores (PyramidTNT the most).
# Twins-SVT-S at 160x160 has one LSA window in its last stage and several
# at the second size checked, which a graph fixed at its example would
# fail; a stage of two blocks has both an LSA and a GSA block. The exports
# take half a minute (TNT) to two minutes (PyramidTNT) on 2 cores: they are
# ``long`` tests (``make test-long``); the demo exports check PCPVT's and
# SVT's detectors, at the demos' widths, in the default run.
FULL_SIZE = {
    'TNT': ('configs/tnt/retinanet_tnt-s-p16_fpn_1x_coco.py', {
        'model.backbone.arch':
        dict(TNT.arch_zoo['s'], num_layers=3, _delete_=True),
        'model.backbone.out_indices': (0, 1, 2)
    }),
    'PyramidTNT':
    ('configs/pyramid_tnt/retinanet_pyramid-tnt-ti_fpn_1x_coco.py', {
        'model.backbone.arch':
        dict(PyramidTNT.arch_zoo['ti'], depths=[1, 1, 1, 1], _delete_=True)
    }),
    'Twins': ('configs/twins/retinanet_twins-svt-s_fpn_1x_coco.py', {
        'model.backbone.arch':
        dict(SVT.arch_zoo['s'], depths=[2, 2, 2, 2], _delete_=True)
    }),
}
# --shape of the exports (traced at 512, MIN_DYNAMIC_TRACE_SIZE): the demo
# scenes' size, and a small one for the full-size detectors.
DEMO_SIZE = (128, 128)
FULL_SIZE_SHAPE = (160, 160)
# Logit spread of the rescaled classification layers of random detectors.
LOGIT_STD = 1.5
# An image of the third verified size of DEMO_SIZE, and the input it is
# padded to at the configs' pad_size_divisor=32.
PADDED = ((97, 165), (128, 192))


def export_demo(config, scenes, short_runs, tmp_path):
    """Export the short run of a demo detector through the tool with
    ``--dynamic-export --verify`` on a validation scene.

    Returns:
        tuple: The tool's output, the ONNX file, the checkpoint and the
        scene.
    """
    run = short_runs.train(
        config,
        data_options(config, scenes) + short_epochs(DEMO_EPOCHS[config]))
    onnx_file = tmp_path / 'detector.onnx'
    scene = str(scenes / 'coco' / 'val' / '000001.jpg')
    result, seconds = run_tool([
        'tools/deployment/pytorch2onnx.py', config, run.checkpoint,
        '--output-file',
        str(onnx_file), '--shape', *map(str, DEMO_SIZE), '--dynamic-export',
        '--verify', '--verify-image', scene
    ],
                               timeout=600)
    assert result.returncode == 0, describe(result)
    print(f'{config}: exported and verified in {seconds:.0f} s')
    return result.stdout, str(onnx_file), run.checkpoint, scene


def check_verified(out, outputs):
    """Assert the tool's output names ``outputs`` and three checks that
    passed with detections; return the verify lines."""
    assert 'outputs ' + ', '.join(repr(name) for name in outputs) in out
    assert 'Dynamic axes: height and width' in out
    lines = [line for line in out.splitlines() if line.startswith('Verify')]
    print('\n'.join(lines))
    assert len(lines) == 4 and all(line.endswith(': OK') for line in lines)
    for size in ('128, 128', '167, 195', '97, 165'):
        assert any(f'(1, 3, {size})' in line for line in lines), size
    assert 'Verify (1, 3, 128, 192), image (97, 165) padded: ' in lines[3]
    counts = [int(re.search(r'(\d+) detections \(mmdet', line).group(1))
              for line in lines]
    assert min(counts) > 0, lines
    return lines


@pytest.mark.slow
@short_run_group(RETINANET)
def test_retinanet_demo_export(demo_scenes, short_runs, tmp_path):
    out, *_ = export_demo(RETINANET, demo_scenes, short_runs, tmp_path)
    check_verified(out, ('boxes', 'scores', 'labels'))


@pytest.mark.slow
@short_run_group(MASK_RCNN)
def test_mask_rcnn_demo_export(demo_scenes, short_runs, tmp_path):
    out, onnx_file, checkpoint, scene = export_demo(MASK_RCNN, demo_scenes,
                                                    short_runs, tmp_path)
    lines = check_verified(out, ('boxes', 'scores', 'labels', 'roi_masks'))
    assert all('min mask IoU' in line for line in lines)

    # The same dynamic graph in OpenVINO: the sizes, masks and padded
    # input the tool checked in ONNX Runtime.
    model = build_model(MASK_RCNN, checkpoint)
    graph = export_graph(model)
    checks = verify_sizes(graph, DEMO_SIZE, dynamic=True)
    padded = padded_check(model, checks[-1][1:], True)
    report = verify_onnx(onnx_file, graph, checks, image=scene,
                         padded=padded, backend='openvino')
    print(report)
    assert report.passed and len(report) == 4
    assert all(result['count'] > 0 for result in report)


def spread_scores(model, inputs):
    """Rescale the final classification layers of a random detector
    (``retina_cls``, ``rpn_cls``, ``fc_cls``) so that their logits on
    ``inputs`` have the standard deviation ``LOGIT_STD`` about their bias
    (the focal-loss prior), one layer after the other."""
    for name, layer in model.named_modules():
        if not name.endswith(('retina_cls', 'rpn_cls', 'fc_cls')):
            continue
        found = []

        def record(module, args, output):
            bias = module.bias.view(-1, *[1] * (output.dim() - 2))
            found.append((output - bias).flatten())

        hook = layer.register_forward_hook(record)
        eager_detections(model, inputs)
        hook.remove()
        shifts = torch.cat(found)
        scale = LOGIT_STD / shifts.std()
        with torch.no_grad():
            layer.weight *= scale
            layer.bias -= scale * shifts.mean()


@pytest.mark.long
@pytest.mark.parametrize('family', list(FULL_SIZE))
def test_full_size_export(tmp_path, family):
    config, options = FULL_SIZE[family]
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(options)
    torch.manual_seed(0)
    model = build_model(cfg)
    spread_scores(model, detector_input(model, DEMO_SIZE, seed=1))
    graph = export_graph(model)
    onnx_file = str(tmp_path / f'{family}.onnx')
    ranges = export_onnx(graph, onnx_file, FULL_SIZE_SHAPE, dynamic=True)
    assert ranges['batch'] == (1, 1)
    assert ranges['height'][1] is None and ranges['width'][1] is None

    checks = verify_sizes(graph, FULL_SIZE_SHAPE, dynamic=True)
    padded = padded_check(model, checks[-1][1:], True)
    report = verify_onnx(onnx_file, graph, checks, padded=padded)
    print(report)
    assert report.task == 'detector' and report.passed
    shapes = [check[1:] for check in checks]
    for shape, result in zip([*shapes, padded[1]], report):
        assert result['shape'] == (1, 3, *shape)
        assert result['error'] is None, result
        assert result['count'] > 0


def test_verify_fails_without_nms(monkeypatch):
    """The demo RetinaNet's graph in PyTorch with and without its NMS
    against mmdet: only the first matches."""
    cfg = Config.fromfile(RETINANET)
    cfg.merge_from_dict({'model.test_cfg.score_thr': 0.0})
    torch.manual_seed(0)
    model = build_model(cfg)
    graph = export_graph(model)
    inputs = detector_input(model, (96, 128))
    expected = eager_detections(model, inputs)

    def match():
        with torch.no_grad():
            outputs = [value.numpy() for value in graph(inputs)]
        return match_detections(
            dict(zip(graph.output_names, outputs)), expected, 128)

    assert match()['error'] is None
    monkeypatch.setattr(torchvision.ops, 'nms',
                        lambda boxes, scores, iou: scores.argsort(
                            descending=True))
    result = match()
    assert result['error'] is not None
    assert result['count'] == result['expected_count'] == 50


def test_padded_check_and_one_image(tmp_path):
    model = build_model(RETINANET)
    assert model.data_preprocessor.pad_size_divisor == 32
    assert padded_check(model, PADDED[0], True) == PADDED
    assert padded_check(model, (128, 128), False) == ((112, 112), (128, 128))

    # One image: refused before anything is exported or run.
    onnx_file = tmp_path / 'x.onnx'
    with pytest.raises(ValueError, match='batch_size must be 1'):
        export_onnx(model, str(onnx_file), (128, 128), batch_size=2)
    assert not onnx_file.exists()
    with pytest.raises(ValueError, match='batch of each check must be 1'):
        verify_onnx(str(onnx_file), model, [(2, 128, 128)])

    model.data_preprocessor.pad_size_divisor = 1
    assert padded_check(model, PADDED[0], True) is None


@pytest.mark.parametrize('config', [RETINANET, MASK_RCNN])
def test_padded_input(config):
    """A random image padded as mmdet pads it, with its ``img_shape``:
    the graph (in PyTorch) finds mmdet's detections, within the image.
    Without ``img_shape`` some boxes reach into the padding, so clipping
    to the padded input would fail the match."""
    img_shape, pad_shape = PADDED
    cfg = Config.fromfile(config)
    cfg.merge_from_dict({'model.test_cfg.score_thr': 0.0}
                        if config == RETINANET else {})
    torch.manual_seed(0)
    model = build_model(cfg)
    graph = export_graph(model)
    inputs = pad_input(detector_input(model, img_shape), pad_shape)
    expected = eager_detections(model, inputs, img_shape)
    with torch.no_grad():
        unclipped = graph(inputs)[0]
        outputs = graph(inputs, torch.tensor(img_shape))
    actual = graph_detections(graph, outputs, img_shape)
    limits = torch.tensor(img_shape).flip(0).repeat(2)
    assert (unclipped > limits).any()
    assert (outputs[0] <= limits).all() and len(outputs[0]) > 0
    if 'masks' in actual:
        assert actual['masks'].shape[1:] == img_shape
    result = match_detections(actual, expected, max(pad_shape))
    assert result['error'] is None, result


def detections(num, seed=0, masks=False):
    """``num`` random detections by decreasing score, 2 to 4 apart."""
    rng = np.random.default_rng(seed)
    corners = rng.uniform(0, 60, (num, 2))
    found = dict(
        boxes=np.concatenate([corners, corners + 20], axis=1),
        scores=np.sort(rng.uniform(0.1, 0.9, num))[::-1].copy(),
        labels=rng.integers(0, 4, num))
    found['scores'] -= np.arange(num) * 1e-3  # at least 1e-3 apart
    if masks:
        found['masks'] = rng.uniform(size=(num, 80, 80)) > 0.5
    return found


def test_match_detections():
    expected = detections(6, masks=True)
    result = match_detections(expected, expected, 80)
    assert result['error'] is None and result['reordered'] == 0
    assert result['min_mask_iou'] == 1

    # near-equal scores in another order: matched as a set, counted
    tied = {k: v.copy() for k, v in expected.items()}
    tied['scores'][2] = tied['scores'][3] + 5e-5
    swapped = {k: v[[0, 1, 3, 2, 4, 5]] for k, v in tied.items()}
    result = match_detections(swapped, tied, 80)
    assert result['error'] is None and result['reordered'] == 2
    # ... but not scores further apart
    swapped = {k: v[[0, 1, 3, 2, 4, 5]] for k, v in expected.items()}
    assert match_detections(swapped, expected, 80)['error'] is not None

    def perturbed(key, index, change):
        found = {k: v.copy() for k, v in expected.items()}
        found[key][index] = change(found[key][index])
        return match_detections(found, expected, 80)

    result = perturbed('boxes', 4, lambda box: box + 0.05)
    assert result['error'] is None and result['max_box'] == pytest.approx(
        0.05)
    assert perturbed('boxes', 4, lambda box: box + 0.1)['error'] is not None
    assert perturbed('scores', 1, lambda s: s + 2e-4)['error'] is not None
    assert perturbed('labels', 0, lambda label: label + 1)['error']
    result = perturbed('masks', 5, lambda mask: ~mask)
    assert result['error'] is not None and result['min_mask_iou'] < 0.5

    fewer = {k: v[:5] for k, v in expected.items()}
    assert '5 detections, mmdet 6' in match_detections(
        fewer, expected, 80)['error']
    none = {k: v[:0] for k, v in expected.items()}
    result = match_detections(none, none, 80)
    assert result['error'] is None and result['count'] == 0


def test_unsupported_post_processing():
    """Soft-NMS in either stage is refused when the model is built."""
    for config, key in ((RETINANET, 'model.test_cfg.nms.type'),
                        (MASK_RCNN, 'model.test_cfg.rpn.nms.type'),
                        (MASK_RCNN, 'model.test_cfg.rcnn.nms.type')):
        cfg = Config.fromfile(config)
        cfg.merge_from_dict({key: 'soft_nms'})
        with pytest.raises(ValueError, match='Only plain NMS'):
            build_model(cfg)
