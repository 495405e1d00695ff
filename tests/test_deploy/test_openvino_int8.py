"""OpenVINO INT8 models through NNCF (``mmtnt.deploy.quantize_openvino``).

* Every task's demo holds its metric: the Fashion-MNIST TNT of the short run
  (top-1 on the first ``TEST_IMAGES`` test images, its graph exported once
  per session by :func:`classifier_graph`) and the UperNet PCPVT,
  RetinaNet and Mask R-CNN of the dense demos' short runs (the graphs that
  tests/test_tools/test_int8_tasks.py quantizes with ONNX Runtime; mIoU and
  bbox AP50 on the 50 validation scenes; RetinaNet with ``--long``
  only). Each is quantized on training
  images through the test pipeline (``CALIBRATION_IMAGES``; the classifier
  on one batch) and scored by the config's evaluator beside the ONNX
  Runtime fp32 graph (:func:`mmtnt.deploy.evaluate.evaluate_graphs`):
  within ``MAX_DROP`` points. The INT8 model keeps the fp32 graph's inputs
  and outputs.
* On a CPU with AVX2 and no VNNI, emulated by ``qemu-x86_64``
  (``AVX2_CPU`` of test_quantize.py, whichever CPU runs the tests), the
  INT8 model of a small graph gives what it gives here: its 7-bit weights
  do not saturate. The same graph with 8-bit weights (``reduce_range=False``)
  is far off there, so the emulation does tell the two apart.
* The IR's path, its write through a temporary name, and the errors.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from demo_runs import (ROOT, build_once, data_options, session_folder,
                       setup_missing, short_fashion_mnist_run,
                       short_run_graph, short_run_group)
from mmengine.config import Config
from test_tools.test_quantize import AVX2_CPU, chain_graph

from mmtnt.deploy import cpu_session, export_onnx
from mmtnt.deploy.evaluate import evaluate_graphs
from mmtnt.deploy.quantize import calibration_inputs
from mmtnt.deploy.quantize_openvino import (openvino_int8_file,
                                            quantize_openvino)
from mmtnt.deploy.runtime import openvino_core

TNT_DEMO = 'configs/demo/tnt-demo_1xb128_fashion-mnist.py'
UPERNET = 'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
RETINANET = 'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
MASK_RCNN = 'configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py'
DENSE = (UPERNET, RETINANET, MASK_RCNN)
#: The demos checked only with ``--long`` (make test-long), to keep within
#: the suite's time: RetinaNet's detection ops (TopK, NonMaxSuppression)
#: are also Mask R-CNN's, which is checked in every run.
LONG = (RETINANET, )
#: Each demo's metric and its scale to points (COCO's APs are 0..1).
METRICS = {
    TNT_DEMO: ('accuracy/top1', 1),
    UPERNET: ('mIoU', 1),
    RETINANET: ('coco/bbox_mAP_50', 100),
    MASK_RCNN: ('coco/bbox_mAP_50', 100),
}
#: The fp32 metric below which a comparison says little: about half of
#: what the short runs reach (top-1 74, mIoU 47.5, AP50 0.41 and 0.56).
MIN_FP32 = {
    TNT_DEMO: 50.0, UPERNET: 30.0, RETINANET: 0.2, MASK_RCNN: 0.2
}
#: The largest drop from fp32 accepted, in points. Measured (torch 2.13,
#: 8 calibration images): top-1 +0.4
#: (68.6 -> 69.0), mIoU -0.67 (47.48 -> 46.81), bbox AP50 +0.3 (RetinaNet,
#: 0.407 -> 0.410) and -0.5 (Mask R-CNN, 0.484 -> 0.479; -1.4 with its
#: predictors quantized too, whatever the calibration images).
MAX_DROP = 1.0
#: Training images that calibrate each dense demo; NNCF's time goes to
#: analysing the graph, whatever their number. The UperNet short run of
#: torch 2.15 (fp32 mIoU 45.85) lost 1.53, 1.04, 0.96 and 0.73 points with
#: 8, 16, 32 and 64 images.
CALIBRATION_IMAGES = 64
#: The Fashion-MNIST demo: its graph's fixed batch (one batch of training
#: images calibrates it) and the test images scored.
BATCH = 100
TEST_IMAGES = 1000


def ports(model):
    """The names and element types of an OpenVINO model's inputs and
    outputs."""
    return [(port.get_names(), port.get_element_type())
            for port in model.inputs + model.outputs]


def quantize_and_score(cfg, onnx_file, calibration, num_images=None):
    """Quantize ``onnx_file`` into its IR; check that the INT8 model keeps
    the fp32 graph's inputs and outputs; score the ONNX Runtime fp32 graph
    and the INT8 model on the same test images.

    Returns:
        dict: ``fp32`` and ``int8`` -> the evaluator's metrics.
    """
    ir_file = quantize_openvino(onnx_file, calibration)
    assert ir_file == openvino_int8_file(onnx_file)
    core = openvino_core()
    assert ports(core.read_model(ir_file)) == ports(
        core.read_model(onnx_file))
    return evaluate_graphs(
        cfg, dict(fp32=onnx_file, int8=(onnx_file, 'openvino', 'int8')),
        num_threads=1, num_images=num_images)


def assert_holds(config, metrics):
    """Assert that the INT8 model is within ``MAX_DROP`` points of fp32 on
    the demo's metric, and fp32 above ``MIN_FP32``."""
    name, scale = METRICS[config]
    values = {graph: float(m[name]) for graph, m in metrics.items()}
    print(f'{config} {name}: {values}')
    assert values['fp32'] >= MIN_FP32[config], values
    assert (values['fp32'] - values['int8']) * scale <= MAX_DROP + 1e-6, (
        values)


def classifier_graph(run, cfg, tmp_path_factory):
    """The fp32 graph of the Fashion-MNIST demo's short run (logits, batch
    ``BATCH``), exported once per test session, as test_quantize.py exports
    it."""
    folder = session_folder(tmp_path_factory) / 'demo_graphs' / 'tnt-demo'

    def export(folder):
        export_onnx(cfg, str(folder / 'fp32.onnx'), (32, 32),
                    batch_size=BATCH, logits=True, checkpoint=run.checkpoint)

    build_once(folder, export)
    return str(folder / 'fp32.onnx')


@pytest.mark.slow
@short_run_group(TNT_DEMO)
def test_openvino_int8_classifier_holds_top1(fashion_mnist, short_runs,
                                             tmp_path_factory, tmp_path):
    run = short_runs.train(TNT_DEMO, short_fashion_mnist_run())
    cfg = Config.fromfile(os.path.join(ROOT, TNT_DEMO))
    for split in ('train', 'val', 'test'):
        cfg[f'{split}_dataloader'].dataset.data_root = fashion_mnist
    cfg.test_dataloader.batch_size = BATCH
    onnx_file = str(tmp_path / 'fp32.onnx')
    shutil.copy(classifier_graph(run, cfg, tmp_path_factory), onnx_file)
    calibration = calibration_inputs(
        cfg, BATCH, split='train', batch_size=BATCH)
    assert_holds(TNT_DEMO, quantize_and_score(cfg, onnx_file, calibration,
                                              TEST_IMAGES))


@pytest.mark.slow
@pytest.mark.parametrize(
    'config', [
        pytest.param(c, marks=[short_run_group(c)] +
                     ([pytest.mark.long] if c in LONG else []))
        for c in DENSE
    ],
    ids=['upernet', 'retinanet', 'mask_rcnn'])
def test_openvino_int8_dense_demo_holds_its_metric(config, demo_scenes,
                                                   short_runs,
                                                   tmp_path_factory,
                                                   tmp_path):
    cfg = Config.fromfile(os.path.join(ROOT, config))
    cfg.merge_from_dict(
        dict(option.split('=', 1)
             for option in data_options(config, demo_scenes)))
    onnx_file = str(tmp_path / 'fp32.onnx')
    shutil.copy(
        short_run_graph(config, demo_scenes, short_runs,
                        tmp_path_factory)[0], onnx_file)
    calibration = calibration_inputs(cfg, CALIBRATION_IMAGES, split='train')
    assert_holds(config, quantize_and_score(cfg, onnx_file, calibration))


RUN_IR = """
import sys
import numpy as np
import openvino as ov
core = ov.Core()
feed = np.load(sys.argv[1])['input']
np.savez(sys.argv[2], *(
    core.compile_model(name, 'CPU', {'INFERENCE_PRECISION_HINT': 'f32'})
    ({'input': feed})[0] for name in sys.argv[3:]))
"""


def run_emulated(ir_files, feed, folder, cpu):
    """Run OpenVINO models on ``feed`` in a new process of this interpreter
    under ``qemu-x86_64 -cpu CPU``; their outputs, in order."""
    np.savez(folder / 'feed.npz', input=feed)
    command = [
        'qemu-x86_64', '-cpu', cpu, sys.executable, '-c', RUN_IR,
        str(folder / 'feed.npz'),
        str(folder / 'out.npz'), *map(str, ir_files)
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = np.load(folder / 'out.npz')
    return [outputs[f'arr_{i}'] for i in range(len(ir_files))]


def test_int8_model_computes_alike_without_vnni(tmp_path):
    """On an emulated AVX2 CPU without VNNI (no AVX-512 either: OpenVINO
    picks its AVX2 kernels), the 7-bit model gives what it gives on this
    CPU, close to fp32; the 8-bit one does not."""
    if shutil.which('qemu-x86_64') is None:
        setup_missing('qemu-x86_64 is missing: tools/setup_env.sh (make '
                      'setup) installs the Debian package qemu-user when '
                      'apt-get is usable as root.')
    fp32 = chain_graph(tmp_path / 'chain.onnx')
    feed = np.random.default_rng(1).standard_normal((4, 8), np.float32)
    files = [
        quantize_openvino(fp32, [feed]),
        quantize_openvino(fp32, [feed], str(tmp_path / 'chain-8bit.xml'),
                          reduce_range=False)
    ]
    seven_bit, eight_bit = run_emulated(files, feed, tmp_path, AVX2_CPU)
    core = openvino_core()
    expected, *here = (
        core.compile_model(name, 'CPU', {'INFERENCE_PRECISION_HINT': 'f32'})
        ({'input': feed})[0] for name in [fp32] + files)
    bound = 0.05 * np.abs(expected).max()
    np.testing.assert_allclose(seven_bit, here[0], rtol=0, atol=1e-5 * bound)
    assert np.abs(seven_bit - expected).max() <= bound
    assert np.abs(here[1] - expected).max() <= bound
    assert np.abs(eight_bit - expected).max() > 2 * bound


def test_quantize_openvino_writes_through_a_temporary_name(tmp_path):
    fp32 = chain_graph(tmp_path / 'chain.onnx')
    assert openvino_int8_file(fp32) == str(tmp_path /
                                           'chain_openvino_int8.xml')
    with pytest.raises(ValueError, match='No OpenVINO INT8 IR'):
        cpu_session(fp32, backend='openvino', precision='int8')
    out = quantize_openvino(fp32, [np.ones((2, 8), np.float32)])
    assert sorted(os.listdir(tmp_path)) == [
        'chain.onnx', 'chain_openvino_int8.bin', 'chain_openvino_int8.xml'
    ]
    assert cpu_session(fp32, backend='openvino', precision='int8').run(
        None, {'input': np.ones((3, 8), np.float32)})[0].shape == (3, 8)
    assert out == openvino_int8_file(fp32)


def test_boundary_products_stay_float(tmp_path):
    """The first and last products of a graph of three stay float, as in
    ONNX Runtime's static mode; the middle one reads quantized inputs."""
    fp32 = chain_graph(tmp_path / 'chain.onnx')
    ir_file = quantize_openvino(fp32, [np.ones((2, 8), np.float32)])
    inputs = {
        op.get_friendly_name(): [
            value.get_node().get_type_name() for value in op.input_values()
        ]
        for op in openvino_core().read_model(ir_file).get_ops()
        if op.get_type_name() == 'MatMul'
    }
    assert [name for name, types in inputs.items()
            if 'FakeQuantize' in types] == ['matmul1'], inputs


def test_quantize_openvino_errors(tmp_path):
    fp32 = chain_graph(tmp_path / 'chain.onnx')
    with pytest.raises(FileNotFoundError, match='missing.onnx'):
        quantize_openvino(str(tmp_path / 'missing.onnx'),
                          [np.ones((1, 8), np.float32)])
    for inputs in (None, []):
        with pytest.raises(ValueError, match='needs calibration inputs'):
            quantize_openvino(fp32, inputs)
    assert not os.path.exists(openvino_int8_file(fp32))
