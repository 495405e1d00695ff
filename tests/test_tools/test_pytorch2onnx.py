"""Checks of the ONNX export of :mod:`mmtnt.deploy` and its command line
``tools/deployment/pytorch2onnx.py`` (:func:`mmtnt.deploy.cli.export_main`).

* In-process, a classifier around the tiny arch of TNT and PCPVT
  (``tests/tiny_backbones.py``) is exported with dynamic axes (traced at
  512x512, see ``MIN_DYNAMIC_TRACE_SIZE``), and ONNX Runtime is compared
  with PyTorch at sizes and batches the export did not see, which pad,
  mask and resize differently (a graph specialised to its example input
  fails there). PyramidTNT's and SVT's backbones are exported the same way
  and checked in ONNX Runtime at three sizes by
  test_pytorch2onnx_detection.py (their full-size RetinaNets; SVT-S has a
  single LSA window in its last stage at the first size and several at
  the second); their classifier exports here took 80 s of the suite.
* The tool run as a user does on the UperNet demo segmentor with a
  checkpoint (``--dynamic-export --verify``), then its graph checked at
  more sizes in-process.
* Clear errors: unsupported detectors, a missing checkpoint, an input too
  small.
* Export by name: ``mmtnt://NAME`` fetched from the hub tests' local
  weights server (tests/hub_server.py) and exported with
  ``--verify``; its graph gives the served timm model's logits, as do the
  graphs that ``export_onnx`` writes given the NAME (its published weights
  by default) and the config file with the cached checkpoint. A hub
  failure ends in one message, without a traceback; an unknown NAME in a
  ValueError.
* Building for export leaves no default scope behind.
* A classifier's ``--verify`` fails a graph whose logit of one unlikely
  class is off by 2, which the difference relative to the largest score
  hides.
* The graph-friendly adaptive pooling against PyTorch's.
"""
import copy

import numpy as np
import pytest
import torch
import torch.nn as nn
from demo_runs import describe, run_tool
from hub_server import TNT_CONFIG, TNT_URL, entry, serve_tnt
from mmengine.config import Config
from mmengine.registry import DefaultScope
from tiny_backbones import TNT_TINY, TWINS_TINY

from mmtnt import hub
from mmtnt.deploy import (BACKENDS, DEFAULT_TOLERANCE, INPUT_NAME,
                          ClassifierGraph, build_model, cpu_session,
                          dynamic_trace_shape,
                          export_graph, export_onnx, second_shape, verify_onnx)
from mmtnt.deploy.cli import export_main as main
from mmtnt.deploy.graphs import adaptive_avg_pool2d_by_products
from mmtnt.deploy.verify import relative_difference

SEG_CONFIG = 'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
DET_CONFIG = 'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
NUM_CLASSES = 5
TOLERANCE = 1e-4
# Backbone config and output channels of each family's tiny arch.
TINY_CLASSIFIERS = {
    'TNT': (dict(type='mmtnt.TNT', arch=TNT_TINY, img_size=64), 16),
    'PCPVT': (dict(type='mmtnt.PCPVT', arch=TWINS_TINY), 32),
}
# The --shape of each export: sizes that every stride and patch divides,
# and that match TNT's stored position terms (64).
EXPORT_SIZES = {
    'TNT': (64, 64),
    'PCPVT': (96, 96),
}
# (batch, height, width) checked: other batches, two sizes as in ImageNet
# testing, and one that pads every family's input or stages.
CLASSIFIER_CHECKS = [(1, 224, 224), (3, 256, 320), (2, 100, 132)]


def classifier_config(family):
    """An mmpretrain classifier config around the tiny arch of
    ``family``."""
    backbone, channels = TINY_CLASSIFIERS[family]
    return Config(
        dict(
            default_scope='mmpretrain',
            model=dict(
                type='ImageClassifier',
                backbone=backbone,
                head=dict(
                    type='LinearClsHead',
                    num_classes=NUM_CLASSES,
                    in_channels=channels))))


def assert_checks_pass(report, checks):
    assert [r['shape'][0] for r in report] == [c[0] for c in checks]
    assert [r['shape'][2:] for r in report] == [c[1:] for c in checks]
    for result in report:
        assert result['error'] is None, result
        assert result['relative'] <= TOLERANCE, result
        if 'worst' in result:  # classifiers: each output
            assert result['worst']['ratio'] <= 1, result
    assert report.passed and all(line.endswith(': OK')
                                 for line in report.lines())


@pytest.mark.parametrize('family', list(TINY_CLASSIFIERS))
def test_dynamic_classifier_export(tmp_path, family):
    torch.manual_seed(0)
    model = build_model(classifier_config(family))
    graph = export_graph(model, logits=True)
    onnx_file = str(tmp_path / f'{family}.onnx')
    ranges = export_onnx(
        graph, onnx_file, EXPORT_SIZES[family], dynamic=True)
    assert set(ranges) == {'batch', 'height', 'width'}
    for axis in ('height', 'width'):
        low, high = ranges[axis]
        assert high is None and low <= 100

    # Real logits: distinct per image and per class, so that a graph
    # returning constants or mixing the batch cannot match.
    with torch.no_grad():
        logits = graph(torch.randn(2, 3, 100, 132))
    assert logits.shape == (2, NUM_CLASSES)
    assert logits.std(dim=1).min() > 1e-3
    assert (logits[0] - logits[1]).abs().max() > 1e-3
    report = verify_onnx(onnx_file, graph, CLASSIFIER_CHECKS)
    assert_checks_pass(report, CLASSIFIER_CHECKS)

    # The default output: the softmax of those logits.
    scores = ClassifierGraph(model)(torch.randn(2, 3, 96, 96))
    assert torch.allclose(scores.sum(dim=1), torch.ones(2))


def test_tool_on_demo_segmentor(tmp_path):
    """The command line with a checkpoint, then more sizes in-process."""
    torch.manual_seed(0)
    model = build_model(SEG_CONFIG)
    checkpoint = tmp_path / 'upernet.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, checkpoint)
    onnx_file = tmp_path / 'upernet.onnx'
    args = [
        'tools/deployment/pytorch2onnx.py', SEG_CONFIG,
        str(checkpoint), '--output-file',
        str(onnx_file), '--shape', '128', '128', '--dynamic-export',
        '--verify', '--verify-shape', '96', '160'
    ]
    result, _ = run_tool(args, timeout=300)
    assert result.returncode == 0, describe(result)
    out = result.stdout
    assert "output 'seg_logits'" in out
    assert 'mean=[123.675, 116.28, 103.53]' in out
    assert 'Verify (1, 3, 128, 128)' in out
    assert 'Verify (2, 3, 96, 160)' in out
    assert out.count(': OK') == 2 and 'FAILED' not in out

    # The graph of the loaded weights: logits at the input resolution, in
    # both runtimes.
    graph = export_graph(model)
    checks = [(2, 160, 128), (1, 100, 130)]
    for backend in BACKENDS:
        report = verify_onnx(str(onnx_file), graph, checks, seed=1,
                             backend=backend)
        assert report.task == 'segmentor'
        assert_checks_pass(report, checks)
    with torch.no_grad():
        seg_logits = graph(torch.randn(1, 3, 100, 130))
    assert seg_logits.shape == (1, 5, 100, 130)
    assert seg_logits.std() > 1e-3


def run_main(argv):
    """The tool's ``main``; return the message it exits with."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    return str(info.value)


def test_clear_errors(tmp_path):
    onnx_file = str(tmp_path / 'x.onnx')
    # Detectors: RetinaNet and Mask R-CNN's heads only.
    message = run_main([
        DET_CONFIG, '--output-file', onnx_file, '--shape', '128', '128',
        '--cfg-options', 'model.bbox_head.type=ATSSHead'
    ])
    assert 'Cannot export a RetinaNet (ATSSHead)' in message
    assert 'RetinaHead' in message and 'StandardRoIHead' in message
    message = run_main([
        DET_CONFIG, '--output-file', onnx_file, '--shape', '128', '128',
        '--batch-size', '2'
    ])
    assert '--batch-size must be 1' in message

    message = run_main([
        SEG_CONFIG,
        str(tmp_path / 'missing.pth'), '--output-file', onnx_file, '--shape',
        '128', '128'
    ])
    assert 'cannot read checkpoint' in message
    assert 'missing.pth: no such file' in message

    config = tmp_path / 'pcpvt_tiny.py'
    config.write_text(classifier_config('PCPVT').pretty_text)
    message = run_main(
        [str(config), '--output-file', onnx_file, '--shape', '8', '64'])
    assert 'cannot take a 8x64 input' in message
    assert 'too small' in message


def test_export_by_name(tmp_path, capsys, weights_server, model_index):
    """``mmtnt://tnt-tiny``: one download, a verified export, and the
    graph's logits are those of the served timm model; so are those of
    ``export_onnx`` given the name (the published weights by default), or
    the config file and the cached checkpoint."""
    source = serve_tnt(weights_server, model_index)
    onnx_file = str(tmp_path / 'tnt.onnx')
    main([
        str(TNT_CONFIG), 'mmtnt://tnt-tiny', '--output-file', onnx_file,
        '--shape', '32', '32', '--batch-size', '2', '--logits', '--verify'
    ])
    out = capsys.readouterr().out
    assert "output 'logits'" in out
    assert out.count(': OK') == 1 and 'FAILED' not in out
    assert sum(weights_server.requests.values()) == 1

    by_name = str(tmp_path / 'by_name.onnx')
    assert export_onnx('TNT-Tiny', by_name, (32, 32), logits=True) == {}
    by_path = str(tmp_path / 'by_path.onnx')
    export_onnx(str(TNT_CONFIG), by_path, (32, 32), batch_size=2,
                logits=True, checkpoint=hub.fetch_checkpoint('tnt-tiny'))
    assert sum(weights_server.requests.values()) == 1

    images = torch.randn(2, 3, 32, 32,
                         generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = source(images).numpy()
    assert expected.std() > 1e-3
    for exported, batch in [(onnx_file, 2), (by_name, 1), (by_path, 2)]:
        session = cpu_session(exported)
        logits = np.concatenate([
            session.run(None, {INPUT_NAME: part.numpy()})[0]
            for part in images.split(batch)
        ])
        np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)


def test_unknown_name(tmp_path):
    """An unknown model name: a ValueError that says where the names are,
    and no graph."""
    onnx_file = tmp_path / 'x.onnx'
    with pytest.raises(ValueError, match='no-such-model.*list_models'):
        export_onnx('no-such-model', str(onnx_file), (32, 32))
    assert not onnx_file.exists()
    with pytest.raises(TypeError, match='a name, a config file or a Config'):
        export_onnx(3, str(onnx_file), (32, 32))


def current_scope():
    """The instance name and scope of the default scope in force (their
    objects are copies after an ``overwrite_default_scope`` block)."""
    scope = DefaultScope.get_current_instance()
    return scope and (scope.instance_name, scope.scope_name)


def test_building_leaves_no_default_scope():
    """A detector built for export, inside another library's scope and
    outside any: the scope in force before is the one after."""
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        before = current_scope()
        model = build_model(DET_CONFIG)
        assert current_scope() == before and before[1] == 'mmpretrain'
    before = current_scope()
    build_model(TNT_CONFIG, checkpoint=False)
    assert current_scope() == before
    assert type(model).__name__ == 'RetinaNet' and not model.training


def test_export_by_name_says_what_failed(tmp_path, weights_server,
                                         model_index):
    """Nothing served, or an unknown name: the hub's message, no
    traceback, no graph."""
    model_index['tnt-tiny'] = entry('tnt-tiny', TNT_CONFIG, 'TNT', TNT_URL)
    onnx_file = tmp_path / 'tnt.onnx'
    for name, words in [('tnt-tiny', 'HTTP 404'),
                        ('no-such-model', 'no model')]:
        message = run_main([
            str(TNT_CONFIG), f'mmtnt://{name}', '--output-file',
            str(onnx_file), '--shape', '32', '32'
        ])
        assert message.startswith('Error: ') and name in message
        assert words in message and 'Traceback' not in message
    assert not onnx_file.exists()


UNLIKELY_CLASS = 3


def test_verify_sees_one_unlikely_logit_off(tmp_path):
    """A graph whose logit of one class of score ~1e-6 is 2 too high:
    within the old relative tolerance, outside the new elementwise one,
    which the intact graph meets."""
    torch.manual_seed(0)
    model = build_model(classifier_config('TNT'))
    with torch.no_grad():
        model.head.fc.bias[UNLIKELY_CLASS] -= 12
    graph = export_graph(model)
    broken = copy.deepcopy(graph)
    with torch.no_grad():
        broken.classifier.head.fc.bias[UNLIKELY_CLASS] += 2
    shape = EXPORT_SIZES['TNT']
    checks = [(2, *shape)]
    files = dict(intact=tmp_path / 'intact.onnx', broken=tmp_path / 'b.onnx')
    reports = {}
    for name, module in [('intact', graph), ('broken', broken)]:
        export_onnx(module, str(files[name]), shape, batch_size=2)
        reports[name] = verify_onnx(str(files[name]), graph, checks)
    assert {name: report.passed for name, report in reports.items()} == dict(
        intact=True, broken=False)
    intact_line, = reports['intact'].lines()
    broken_line, = reports['broken'].lines()
    assert intact_line.endswith(': OK')
    assert broken_line.endswith(': FAILED')
    assert f'class {UNLIKELY_CLASS} of image' in broken_line

    # The score, and what max|onnx - torch| / max|torch| made of it.
    result, = reports['broken']
    worst = result['worst']
    assert worst['index'][1] == UNLIKELY_CLASS and worst['ratio'] > 100
    assert worst['expected'] < 1e-5
    assert worst['actual'] / worst['expected'] == pytest.approx(
        np.exp(2), rel=1e-3)
    assert result['relative'] <= DEFAULT_TOLERANCE


def test_adaptive_pooling_matches_pytorch():
    for size, out in [((13, 7), (3, 2)), ((6, 6), (6, 6)), ((5, 9), (5, 4)),
                      ((32, 20), (6, 6))]:
        x = torch.randn(2, 4, *size)
        expected = nn.AdaptiveAvgPool2d(out)(x)
        actual = adaptive_avg_pool2d_by_products(x, out)
        assert actual.shape == expected.shape
        assert torch.allclose(actual, expected, atol=1e-6)
    # 1x1 pooling is left to the exporter's own operator
    assert adaptive_avg_pool2d_by_products(torch.randn(1, 1, 4, 4),
                                           (1, 1)) is NotImplemented


def test_relative_difference():
    assert relative_difference(np.ones(3), np.ones(3)) == 0
    assert relative_difference(np.array([1., 3.]), np.array([1., 4.])) == 0.25
    with pytest.raises(ValueError, match='shape'):
        relative_difference(np.ones(3), np.ones(4))
    assert second_shape(224, 224) == (287, 339)
    assert dynamic_trace_shape((224, 640)) == (512, 640)
