"""INT8 ONNX graphs (``mmtnt.deploy.quantize``).

* The demo TNT of the session's short Fashion-MNIST run
  (``short_runs``, shared with tests/test_demo.py: no extra training),
  exported to ONNX and quantized in both modes, must keep its top-1 within
  a point of the fp32 graph's on a slice of the test set, scored as
  ``tools/analysis_tools/int8_benchmark.py`` scores it.
* ``tools/deployment/pytorch2onnx.py --int8 static`` on the same model
  writes an INT8 graph that ONNX Runtime runs.
* On a small hand-made graph: the static mode keeps the first and last
  weighted nodes in fp32 and quantizes those between; the arguments it
  refuses raise clear errors.
"""
import os.path as osp

import numpy as np
import pytest
from demo_runs import ROOT, load_tool_module, short_fashion_mnist_run

from mmtnt.deploy.quantize import (MODES, boundary_nodes, calibration_inputs,
                                   quantize_onnx)

DEMO_CONFIG = 'configs/demo/tnt-demo_1xb128_fashion-mnist.py'
# The graph's fixed batch: the test images run in batches of it, and the
# static mode is calibrated on one batch of training images.
BATCH = 100
TEST_IMAGES = 1000
MAX_DROP = 1.0  # top-1 points
# The short run reaches about 74% on the first 2,000 test images; below
# this the comparison says little.
MIN_FP32_TOP1 = 50.0


def test_quantized_demo_classifier_holds_accuracy(fashion_mnist, short_runs,
                                                  tmp_path):
    from mmengine.config import Config
    bench = load_tool_module('analysis_tools/int8_benchmark.py')
    export = bench.pytorch2onnx
    run = short_runs.train(DEMO_CONFIG, short_fashion_mnist_run())
    cfg = Config.fromfile(osp.join(ROOT, DEMO_CONFIG))
    for split in ('train', 'val', 'test'):
        cfg[f'{split}_dataloader'].dataset.data_root = fashion_mnist
    cfg.test_dataloader.batch_size = BATCH
    model = export.build_model(cfg, run.checkpoint)
    fp32 = str(tmp_path / 'demo.onnx')
    export.export_onnx(
        export.export_graph(model, logits=True),
        fp32, (32, 32),
        channels=1,
        batch_size=BATCH)
    calibration = calibration_inputs(
        cfg, BATCH, split='train', batch_size=BATCH)
    files = bench.quantized_files(fp32, calibration, str(tmp_path / 'demo'))
    sessions = {name: bench.ort_session(f, 2) for name, f in files.items()}
    metrics = bench.evaluate(cfg, model, sessions, TEST_IMAGES)
    top1 = {name: float(m['accuracy/top1']) for name, m in metrics.items()}
    print(f'top-1 on {TEST_IMAGES} test images: {top1}')
    assert top1['fp32'] >= MIN_FP32_TOP1, top1
    for mode in MODES:
        assert top1['fp32'] - top1[mode] <= MAX_DROP, (mode, top1)
    assert 'MatMulInteger' in op_types(files['dynamic'])
    assert 'QuantizeLinear' in op_types(files['static'])


def test_export_tool_writes_the_int8_graph(fashion_mnist, short_runs,
                                           tmp_path, capsys):
    """``pytorch2onnx.py --int8 static`` calibrates on training images and
    writes a QDQ graph beside the fp32 one, which ONNX Runtime runs."""
    import onnxruntime as ort
    tool = load_tool_module('deployment/pytorch2onnx.py')
    run = short_runs.train(DEMO_CONFIG, short_fashion_mnist_run())
    fp32 = tmp_path / 'demo.onnx'
    tool.main([
        osp.join(ROOT, DEMO_CONFIG), run.checkpoint, '--output-file',
        str(fp32), '--shape', '32', '32', '--int8', 'static',
        '--calibration-images', '8', '--cfg-options', *(
            f'{split}_dataloader.dataset.data_root={fashion_mnist}'
            for split in ('train', 'val', 'test'))
    ])
    int8 = tmp_path / 'demo_int8.onnx'
    assert f'calibrated on 8 training images) to {int8}' in (
        capsys.readouterr().out)
    assert 'QuantizeLinear' in op_types(str(int8))
    session = ort.InferenceSession(
        str(int8), providers=['CPUExecutionProvider'])
    scores = session.run(None, {'input': np.zeros((1, 1, 32, 32),
                                                  np.float32)})[0]
    assert scores.shape == (1, 10)


def op_types(onnx_file):
    import onnx
    return {node.op_type for node in onnx.load(onnx_file).graph.node}


def chain_graph(path, layers=3, width=8):
    """An ONNX graph of ``layers`` MatMuls with random weights, each but
    the last followed by a Relu; input (N, width)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nodes, weights, name = [], [], 'input'
    for i in range(layers):
        weights.append(
            numpy_helper.from_array(
                rng.standard_normal((width, width)).astype(np.float32),
                f'w{i}'))
        nodes.append(helper.make_node('MatMul', [name, f'w{i}'], [f'mm{i}'],
                                      name=f'matmul{i}'))
        name = f'mm{i}'
        if i < layers - 1:
            nodes.append(helper.make_node('Relu', [name], [f'relu{i}']))
            name = f'relu{i}'
    graph = helper.make_graph(
        nodes, 'chain',
        [helper.make_tensor_value_info('input', TensorProto.FLOAT,
                                       ['N', width])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                       ['N', width])], weights)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid('', 17)])
    onnx.save(model, str(path))
    return str(path)


def test_static_mode_keeps_boundary_nodes_fp32(tmp_path):
    import onnx
    import onnxruntime as ort
    fp32 = chain_graph(tmp_path / 'chain.onnx')
    assert boundary_nodes(onnx.load(fp32)) == (['matmul0'], ['matmul2'])
    rng = np.random.default_rng(1)
    calibration = [rng.standard_normal((4, 8)).astype(np.float32)]
    out = str(tmp_path / 'chain-int8.onnx')
    quantize_onnx(fp32, out, 'static', calibration)
    nodes = onnx.load(out).graph.node
    produced = {o: node.op_type for node in nodes for o in node.output}
    fed_by = {
        node.name: [produced.get(i) for i in node.input]
        for node in nodes if node.op_type == 'MatMul'
    }
    assert 'DequantizeLinear' not in fed_by['matmul0'] + fed_by['matmul2']
    assert fed_by['matmul1'] == ['DequantizeLinear', 'DequantizeLinear']
    feed = {'input': calibration[0]}
    expected, actual = (ort.InferenceSession(f).run(None, feed)[0]
                        for f in (fp32, out))
    assert np.abs(actual - expected).max() <= 0.05 * np.abs(expected).max()


def test_quantize_errors(tmp_path):
    fp32 = chain_graph(tmp_path / 'chain.onnx')
    out = str(tmp_path / 'out.onnx')
    with pytest.raises(ValueError, match='Unknown quantization mode'):
        quantize_onnx(fp32, out, 'int4')
    with pytest.raises(FileNotFoundError, match='missing.onnx'):
        quantize_onnx(str(tmp_path / 'missing.onnx'), out, 'dynamic')
    for calibration in (None, []):
        with pytest.raises(ValueError, match='needs calibration inputs'):
            quantize_onnx(fp32, out, 'static', calibration)
    with pytest.raises(ValueError, match='Unknown calibration method'):
        quantize_onnx(
            fp32,
            out,
            'static', [np.zeros((1, 8), np.float32)],
            calibrate_method='mse')
    assert not osp.exists(out)


def test_calibration_inputs_split_error():
    from mmengine.config import Config
    cfg = Config.fromfile(osp.join(ROOT, DEMO_CONFIG))
    with pytest.raises(ValueError, match="split must be 'val' or 'train'"):
        calibration_inputs(cfg, 1, split='test')
