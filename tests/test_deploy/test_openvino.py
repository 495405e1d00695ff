"""OpenVINO as the second runtime of :func:`mmtnt.deploy.cpu_session`.

* A tiny TNT classifier (``tests/tiny_backbones.py``; its dynamic export
  is the cheapest of the four families'), exported with dynamic axes,
  runs in OpenVINO at float32 within the classifiers' tolerances of eager
  PyTorch and of ONNX Runtime at two sizes and batches; at bfloat16
  (CPUs with it) within
  :data:`~mmtnt.deploy.BF16_TOLERANCE`, and visibly not at float32 (the
  float32 session must set its precision: OpenVINO's default on such CPUs
  is bfloat16); a session fixed to one input shape (``input_shape``), in
  both runtimes, gives the dynamic one's logits and refuses other shapes.
* The UperNet, RetinaNet and Mask R-CNN demos of the session's short runs
  (their 128x128 graphs shared with test_int8_tasks.py and
  test_deploy_test.py) verified in OpenVINO against eager mmseg and mmdet
  (``verify_onnx(..., backend='openvino')``): the detectors with their
  per-RoI masks, and an image padded to the graph's size with its
  ``img_shape`` fed; then scored by the evaluator on validation scenes in
  both runtimes, with the same metrics; the UperNet in bf16 too, through
  ``tools/deployment/test.py --backend openvino --precision bf16``,
  within :data:`BF16_MIOU_POINTS` of fp32's mIoU.
* The one-line errors: an unknown backend or precision, bf16 in ONNX
  Runtime or on a CPU without it, a missing INT8 IR, OpenVINO not
  installed, ``pytorch2onnx.py --int8 dynamic --backend openvino``.
"""
import gc
import sys

import numpy as np
import pytest
import torch
from demo_runs import data_options, short_run_graph, short_run_group
from mmengine.config import Config
from tiny_backbones import TNT_TINY

from mmtnt.deploy import (BF16_TOLERANCE, CLS_TOLERANCES, INPUT_NAME,
                          build_model, cpu_session, export_graph,
                          export_onnx, padded_check, verify_onnx)
from mmtnt.deploy.cli import evaluate_main, export_main
from mmtnt.deploy.evaluate import evaluate_graphs
from mmtnt.deploy.runtime import openvino_core
from mmtnt.deploy.verify import worst_element

UPERNET = 'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
RETINANET = 'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
MASK_RCNN = 'configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py'
#: (batch, height, width) of the classifier checks: the export's size and
#: one that pads TNT's patches and interpolates its position terms, at
#: another batch.
CLASSIFIER_CHECKS = [(1, 64, 64), (2, 100, 132)]
#: Validation scenes each demo is scored on in both runtimes, and the
#: metrics compared (COCO's rounded to 3 decimals).
EVALUATED_IMAGES = 8
METRICS = {
    UPERNET: ('mIoU', ),
    RETINANET: ('coco/bbox_mAP_50', ),
    MASK_RCNN: ('coco/bbox_mAP_50', 'coco/segm_mAP_50'),
}
#: float32 in OpenVINO: as far from eager PyTorch as ONNX Runtime is.
FP32_RELATIVE = 1e-5
#: The UperNet demo scored in bf16 by tools/deployment/test.py: mIoU points
#: from fp32's accepted.
BF16_MIOU_POINTS = 1.0

pytest.importorskip('openvino')


def has_bf16():
    """Whether OpenVINO's CPU plugin runs bfloat16 on this CPU."""
    return 'BF16' in openvino_core().get_property(
        'CPU', 'OPTIMIZATION_CAPABILITIES')


@pytest.fixture(scope='module')
def tiny_classifier(tmp_path_factory):
    """A tiny TNT classifier (random weights, logits) and its dynamic
    graph."""
    torch.manual_seed(0)
    model = build_model(
        Config(
            dict(
                default_scope='mmpretrain',
                model=dict(
                    type='ImageClassifier',
                    backbone=dict(
                        type='mmtnt.TNT', arch=TNT_TINY, img_size=64),
                    head=dict(
                        type='LinearClsHead', num_classes=5,
                        in_channels=16)))))
    graph = export_graph(model, logits=True)
    onnx_file = str(tmp_path_factory.mktemp('openvino') / 'tnt.onnx')
    export_onnx(graph, onnx_file, (64, 64), dynamic=True)
    return graph, onnx_file


def test_classifier_fp32_equals_eager_and_ort(tiny_classifier):
    graph, onnx_file = tiny_classifier
    report = verify_onnx(onnx_file, graph, CLASSIFIER_CHECKS,
                         backend='openvino', num_threads=1)
    print(report)
    assert report.passed and len(report) == 2
    assert all(check['relative'] < FP32_RELATIVE for check in report)
    session = cpu_session(onnx_file, 1, backend='openvino')
    ort = cpu_session(onnx_file, 1)
    assert [p.shape for p in session.get_inputs()] == [[None, 3, None, None]]
    assert [(p.name, p.type) for p in session.get_outputs()] == [
        (p.name, p.type) for p in ort.get_outputs()]
    rng = np.random.default_rng(1)
    for batch, height, width in CLASSIFIER_CHECKS:
        images = rng.standard_normal((batch, 3, height, width), np.float32)
        actual, = session.run(None, {INPUT_NAME: images})
        expected, = ort.run(['logits'], {INPUT_NAME: images})
        assert actual.shape == (batch, 5) and actual.dtype == np.float32
        worst = worst_element(actual, expected, *CLS_TOLERANCES['logits'])
        assert worst['ratio'] <= 1, worst


@pytest.mark.parametrize('backend', ['onnxruntime', 'openvino'])
def test_session_fixed_to_one_input_shape(tiny_classifier, backend):
    """``input_shape`` fixes the dynamic graph's image input in both
    runtimes: the session gives the dynamic session's logits at that shape
    and refuses another."""
    _, onnx_file = tiny_classifier
    batch, height, width = CLASSIFIER_CHECKS[1]
    shape = (batch, 3, height, width)
    fixed = cpu_session(onnx_file, 1, backend=backend, input_shape=shape)
    dynamic = cpu_session(onnx_file, 1, backend=backend)
    assert [p.shape for p in fixed.get_inputs()] == [list(shape)]
    images = np.random.default_rng(2).standard_normal(shape, np.float32)
    actual, = fixed.run(None, {INPUT_NAME: images})
    expected, = dynamic.run(None, {INPUT_NAME: images})
    worst = worst_element(actual, expected, *CLS_TOLERANCES['logits'])
    assert worst['ratio'] <= 1, worst
    with pytest.raises(Exception, match='(?i)dimension|size'):
        fixed.run(None, {INPUT_NAME: images[:1]})
    with pytest.raises(ValueError, match=r'^input_shape \(3, 64, 64\) is '
                       r'not \(N, C, H, W\)\.$'):
        cpu_session(onnx_file, backend=backend, input_shape=(3, 64, 64))


@pytest.mark.skipif(not has_bf16(), reason='this CPU lacks bfloat16')
def test_classifier_bf16_within_its_tolerance(tiny_classifier):
    graph, onnx_file = tiny_classifier
    report = verify_onnx(onnx_file, graph, CLASSIFIER_CHECKS,
                         backend='openvino', precision='bf16', num_threads=1)
    print(report)
    assert report.passed and report.tolerance == BF16_TOLERANCE
    assert all(line.endswith(f'tolerance {BF16_TOLERANCE:g}): OK')
               for line in report.lines())
    # bfloat16 rounding shows: the session did compute in bf16.
    assert max(check['relative'] for check in report) > 10 * FP32_RELATIVE


def dense_demo_model(config, checkpoint):
    """The demo's model with the short run's weights, in eval mode."""
    return build_model(config, checkpoint).eval()


@pytest.mark.slow
@pytest.mark.parametrize(
    'config', [pytest.param(c, marks=short_run_group(c)) for c in METRICS],
    ids=['upernet', 'retinanet', 'mask_rcnn'])
def test_dense_demo_in_openvino(config, demo_scenes, short_runs,
                                tmp_path_factory):
    onnx_file, run, data = short_run_graph(config, demo_scenes, short_runs,
                                           tmp_path_factory)
    model = dense_demo_model(config, run.checkpoint)
    shape = (128, 128)
    padded = padded_check(model, shape, dynamic=False)
    report = verify_onnx(onnx_file, model, [(1, *shape)], num_threads=1,
                         padded=padded, backend='openvino',
                         image=str(demo_scenes / 'coco' / 'val' /
                                   '000001.jpg') if padded else None)
    print(report)
    assert report.passed and len(report) == (2 if padded else 1)
    if padded:  # the detectors: found something, masks matched
        assert report.checks[1]['img_shape'] == (112, 112)
        assert min(check['count'] for check in report) > 0
        if config == MASK_RCNN:
            assert report.checks[1]['min_mask_iou'] >= 0.99
    cfg_options = dict(o.split('=', 1) for o in data)
    cfg_options.update({
        'test_dataloader.dataset.indices': EVALUATED_IMAGES,
        'test_dataloader.num_workers': 0,
        'test_dataloader.persistent_workers': False
    })
    metrics = evaluate_graphs(
        config,
        dict(ort=onnx_file, openvino=(onnx_file, 'openvino', 'fp32')),
        num_threads=1,
        cfg_options=cfg_options)
    for name in METRICS[config]:
        values = [float(metrics[graph][name]) for graph in metrics]
        print(config, name, values)
        assert values[0] > 0 and values[0] == pytest.approx(
            values[1], abs=1e-3), (name, metrics)
    if config == UPERNET and has_bf16():
        bf16 = evaluate_main([
            config, onnx_file, '--backend', 'openvino', '--precision',
            'bf16', '--threads', '1', '--cfg-options'
        ] + [f'{key}={value}' for key, value in cfg_options.items()])
        print('bf16 mIoU', bf16['mIoU'])
        assert abs(bf16['mIoU'] - metrics['ort']['mIoU']) <= BF16_MIOU_POINTS


@pytest.mark.parametrize('backend, precision, message', [
    ('tensorrt', 'fp32', "Unknown backend 'tensorrt': use one of "
     "'onnxruntime', 'openvino'."),
    ('openvino', 'fp16', "Unknown precision 'fp16': use one of 'fp32', "
     "'bf16', 'int8'."),
    ('onnxruntime', 'bf16', "ONNX Runtime runs precision 'fp32' only, not "
     "'bf16'"),
    ('onnxruntime', 'int8', "ONNX Runtime runs precision 'fp32' only"),
])
def test_unknown_or_unsupported_choices(backend, precision, message):
    with pytest.raises(ValueError, match='^' + message.replace(
            '(', r'\(').replace(')', r'\)')) as error:
        cpu_session('any.onnx', backend=backend, precision=precision)
    assert '\n' not in str(error.value)


def test_missing_int8_ir_names_its_command(tmp_path):
    onnx_file = str(tmp_path / 'model.onnx')
    with pytest.raises(ValueError) as error:
        cpu_session(onnx_file, backend='openvino', precision='int8')
    line = str(error.value)
    assert '\n' not in line
    assert line.startswith('No OpenVINO INT8 IR ') and onnx_file in line
    assert '--int8 static --backend openvino' in line


def test_without_openvino_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, 'openvino', None)
    with pytest.raises(ImportError) as error:
        cpu_session('any.onnx', backend='openvino')
    assert str(error.value) == (
        "OpenVINO is not installed: pip install 'mmtnt[openvino]'.")


def test_bf16_refused_where_the_cpu_lacks_it(monkeypatch):
    """A CPU whose OpenVINO capabilities have no BF16 is refused in one
    line that says what to use instead."""
    from mmtnt.deploy import runtime

    class Core:

        def get_property(self, device, name):
            return ['FP32', 'INT8']

    with pytest.raises(ValueError) as error:
        runtime.check_bf16(Core())
    assert str(error.value) == (
        "This CPU lacks bfloat16 (OpenVINO's CPU capabilities: FP32, INT8): "
        "use precision 'fp32' or 'int8'.")


def test_export_tool_refuses_dynamic_int8_for_openvino():
    with pytest.raises(SystemExit) as error:
        export_main([
            'configs/demo/tnt-demo_1xb128_fashion-mnist.py', '--output-file',
            'unused.onnx', '--shape', '32', '32', '--int8', 'dynamic',
            '--backend', 'openvino'
        ])
    assert str(error.value) == ("Error: --int8 dynamic is ONNX Runtime's: "
                                "OpenVINO's INT8 is --int8 static.")


def signal_stack():
    """The calling thread's alternate signal stack: its address, or None
    when it has none (``sigaltstack``)."""
    import ctypes

    class Stack(ctypes.Structure):
        _fields_ = [('sp', ctypes.c_void_p), ('flags', ctypes.c_int),
                    ('size', ctypes.c_size_t)]

    libc = ctypes.CDLL(None, use_errno=True)
    stack = Stack()
    assert libc.sigaltstack(None, ctypes.byref(stack)) == 0
    disabled = 2  # SS_DISABLE
    return None if stack.flags & disabled else stack.sp


def is_mapped(address):
    """Whether ``address`` lies in a mapping of this process."""
    with open('/proc/self/maps') as maps:
        for line in maps:
            low, high = (int(end, 16) for end in line.split()[0].split('-'))
            if low <= address < high:
                return True
    return False


@pytest.mark.skipif(not sys.platform.startswith('linux'),
                    reason='reads /proc/self/maps')
def test_sessions_leave_no_dangling_signal_stack(tmp_path):
    """Sessions closed in the order they were made leave the signal stack
    OpenVINO gives the compiling thread mapped: with a Core per session it
    was left pointing at freed memory, and the process died at its next
    handled signal (SIGCHLD after a DataLoader's workers)."""
    from test_tools.test_quantize import chain_graph
    graph = chain_graph(tmp_path / 'chain.onnx')
    sessions = [cpu_session(graph, 1, backend='openvino') for _ in range(2)]
    assert sessions[1].run(None, {INPUT_NAME: np.ones((1, 8), np.float32)})
    while sessions:
        del sessions[0]
        gc.collect()
        stack = signal_stack()
        assert stack is None or is_mapped(stack), hex(stack)


def test_onnx_runtime_threads_spin_unless_asked_not_to(tmp_path):
    """``spinning=False`` turns ONNX Runtime's busy waiting off, which the
    benchmarks need: beside it, OpenVINO's PCPVT-S took 76 ms instead of
    52 ms at batch 1 on 2 cores (ONNX Runtime's own time did not change)."""
    from test_tools.test_quantize import chain_graph
    graph = chain_graph(tmp_path / 'chain.onnx')
    key = 'session.intra_op.allow_spinning'
    options = cpu_session(graph, 1).get_session_options()
    with pytest.raises(RuntimeError):  # unset: ONNX Runtime's default, 1
        options.get_session_config_entry(key)
    options = cpu_session(graph, 1, spinning=False).get_session_options()
    assert options.get_session_config_entry(key) == '0'
