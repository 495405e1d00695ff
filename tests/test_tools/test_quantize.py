"""INT8 ONNX graphs (``mmtnt.deploy.quantize``).

* The demo TNT of the session's short Fashion-MNIST run
  (``short_runs``, shared with tests/test_demo.py: no extra training),
  exported to ONNX and quantized in both modes, must keep its top-1 within
  a point of the fp32 graph's on a slice of the test set, the three graphs
  scored in one pass by the config's evaluator
  (:func:`mmtnt.deploy.evaluate.evaluate_graphs`, as
  ``python -m benchmarks.int8_benchmark`` scores them).
* ``tools/deployment/pytorch2onnx.py --int8 static`` (its ``main``,
  :func:`mmtnt.deploy.cli.export_main`) on the same model writes an INT8 graph
  that ONNX Runtime runs.
* On a small hand-made graph: the static mode keeps the first and last
  weighted nodes in fp32 and quantizes those between; the arguments it
  refuses raise clear errors.
* Every INT8 graph stores its weights in 7 bits (:func:`assert_no_saturation`),
  so that ONNX Runtime computes the same on CPUs with and without VNNI:
  the accuracy bounds hold on any x86-64 CPU. With 8-bit weights, on a CPU
  with AVX2 and no VNNI, the demo lost 6-8 top-1 points and the small graph
  was off by 6.6 (22% of its largest output); on a CPU with VNNI neither
  moved, so only the weights' range tells the two apart everywhere.
* The small graph's INT8 versions run again on an AVX2 CPU without VNNI
  that ``qemu-x86_64`` emulates (``AVX2_CPU``), whatever CPU runs the
  tests: the 7-bit graphs give there what they give here, and the 8-bit
  static graph is far off (the saturation this guards against).
"""
import os
import os.path as osp
import shutil
import subprocess
import sys

import numpy as np
import pytest
from demo_runs import (ROOT, setup_missing, short_fashion_mnist_run,
                       short_run_group)
from onnx_graphs import op_types

from mmtnt.deploy import export_onnx
from mmtnt.deploy.cli import export_main
from mmtnt.deploy.evaluate import evaluate_graphs
from mmtnt.deploy.quantize import (MODES, REDUCED_WEIGHT_LIMIT, boundary_nodes,
                                   calibration_inputs, cpu_int8_features,
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


@pytest.mark.slow
@short_run_group(DEMO_CONFIG)
def test_quantized_demo_classifier_holds_accuracy(fashion_mnist, short_runs,
                                                  tmp_path):
    from mmengine.config import Config
    run = short_runs.train(DEMO_CONFIG, short_fashion_mnist_run())
    cfg = Config.fromfile(osp.join(ROOT, DEMO_CONFIG))
    for split in ('train', 'val', 'test'):
        cfg[f'{split}_dataloader'].dataset.data_root = fashion_mnist
    cfg.test_dataloader.batch_size = BATCH
    files = dict(fp32=str(tmp_path / 'demo.onnx'))
    export_onnx(
        cfg,
        files['fp32'], (32, 32),
        batch_size=BATCH,
        logits=True,
        checkpoint=run.checkpoint)
    calibration = calibration_inputs(
        cfg, BATCH, split='train', batch_size=BATCH)
    for mode in MODES:
        files[mode] = str(tmp_path / f'demo-int8-{mode}.onnx')
        quantize_onnx(files['fp32'], files[mode], mode, calibration)
    metrics = evaluate_graphs(
        cfg, files, num_threads=2, num_images=TEST_IMAGES)
    top1 = {name: float(m['accuracy/top1']) for name, m in metrics.items()}
    print(f'top-1 on {TEST_IMAGES} test images: {top1}')
    assert top1['fp32'] >= MIN_FP32_TOP1, top1
    for mode in MODES:
        assert top1['fp32'] - top1[mode] <= MAX_DROP, (mode, top1)
    assert 'MatMulInteger' in op_types(files['dynamic'])
    assert 'QuantizeLinear' in op_types(files['static'])
    for mode in MODES:
        assert_no_saturation(files[mode])


@pytest.mark.slow
@short_run_group(DEMO_CONFIG)
def test_export_tool_writes_the_int8_graph(fashion_mnist, short_runs,
                                           tmp_path, capsys):
    """``pytorch2onnx.py --int8 static`` calibrates on training images and
    writes a QDQ graph beside the fp32 one, which ONNX Runtime runs."""
    import onnxruntime as ort
    run = short_runs.train(DEMO_CONFIG, short_fashion_mnist_run())
    fp32 = tmp_path / 'demo.onnx'
    export_main([
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


def assert_no_saturation(onnx_file):
    """Assert that the int8 weights of an INT8 graph lie within
    ``REDUCED_WEIGHT_LIMIT``: no sum of two uint8 x int8 products, which
    ONNX Runtime keeps in 16 bits on CPUs without VNNI, can then saturate
    (and some weight reaches more than half of it: 7 bits are used)."""
    import onnx
    from onnx import TensorProto, numpy_helper
    weights = [
        numpy_helper.to_array(tensor).astype(int)
        for tensor in onnx.load(onnx_file).graph.initializer
        if tensor.data_type == TensorProto.INT8 and len(tensor.dims) >= 2
    ]
    assert weights, f'no int8 weights in {onnx_file}'
    largest = max(int(np.abs(w).max()) for w in weights)
    assert REDUCED_WEIGHT_LIMIT // 2 < largest <= REDUCED_WEIGHT_LIMIT, (
        largest, onnx_file)
    uint8_max = 255
    assert 2 * uint8_max * largest <= np.iinfo(np.int16).max


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
    assert_no_saturation(out)
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


def test_reduce_range_false_uses_8_bit_weights(tmp_path):
    """``reduce_range=False`` writes the full 8-bit weights, which
    :func:`assert_no_saturation` tells apart on any CPU."""
    fp32 = chain_graph(tmp_path / 'chain.onnx')
    out = str(tmp_path / 'chain-int8.onnx')
    quantize_onnx(fp32, out, 'dynamic', reduce_range=False)
    with pytest.raises(AssertionError):
        assert_no_saturation(out)
    quantize_onnx(fp32, out, 'dynamic')
    assert_no_saturation(out)


@pytest.mark.parametrize('flags, features, saturates', [
    ('fpu sse2 avx avx2 fma', ['AVX2'], True),
    ('avx2 avx512f avx512bw', ['AVX2', 'AVX-512'], True),
    ('avx2 avx512f avx512_vnni', ['AVX2', 'AVX-512', 'AVX-512 VNNI'], False),
    ('avx2 avx_vnni', ['AVX2', 'AVX-VNNI'], False),
    ('sse2 sse4_2', [], False),
])
def test_cpu_int8_features(tmp_path, flags, features, saturates):
    cpuinfo = tmp_path / 'cpuinfo'
    cpuinfo.write_text(f'processor\t: 0\nflags\t\t: {flags}\n\n'
                       f'processor\t: 1\nflags\t\t: {flags}\n')
    assert cpu_int8_features(str(cpuinfo)) == dict(
        features=features, saturates=saturates)
    assert cpu_int8_features(str(tmp_path / 'missing')) == dict(
        features=[], saturates=None)


#: A CPU model of ``qemu-x86_64`` with AVX2 and neither AVX-512 nor VNNI:
#: ONNX Runtime's uint8 x int8 products take ``VPMADDUBSW`` there, whose
#: 16-bit sums saturate.
AVX2_CPU = 'EPYC-Rome'
RUN_GRAPHS = """
import sys
import numpy as np
import onnxruntime as ort
feed = dict(np.load(sys.argv[1]))
np.savez(sys.argv[2], *(
    ort.InferenceSession(name, providers=['CPUExecutionProvider'])
    .run(None, feed)[0] for name in sys.argv[3:]))
"""


def run_graphs(onnx_files, feed, folder, cpu=None):
    """Run ONNX graphs on ``feed`` with ONNX Runtime in a new process of
    this interpreter, under ``qemu-x86_64 -cpu CPU`` when ``cpu`` is
    given; their outputs, in order."""
    np.savez(folder / 'feed.npz', **feed)
    command = [sys.executable, '-c', RUN_GRAPHS, str(folder / 'feed.npz'),
               str(folder / 'out.npz'), *map(str, onnx_files)]
    if cpu:
        command = ['qemu-x86_64', '-cpu', cpu] + command
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = np.load(folder / 'out.npz')
    return [outputs[f'arr_{i}'] for i in range(len(onnx_files))]


def test_int8_graphs_compute_alike_without_vnni(tmp_path):
    """On an emulated AVX2 CPU without VNNI, the 7-bit graphs give what
    they give on this CPU, close to fp32; the 8-bit static graph does not
    (its 16-bit sums saturate there, not on CPUs with VNNI)."""
    if shutil.which('qemu-x86_64') is None:
        setup_missing('qemu-x86_64 is missing: tools/setup_env.sh (make '
                      'setup) installs the Debian package qemu-user when '
                      'apt-get is usable as root.')
    fp32 = chain_graph(tmp_path / 'chain.onnx')
    rng = np.random.default_rng(1)
    calibration = [rng.standard_normal((4, 8)).astype(np.float32)]
    files = {}
    for mode in MODES:
        files[mode] = tmp_path / f'{mode}.onnx'
        quantize_onnx(fp32, str(files[mode]), mode, calibration)
    files['static-8bit'] = tmp_path / 'static-8bit.onnx'
    quantize_onnx(fp32, str(files['static-8bit']), 'static', calibration,
                  reduce_range=False)
    feed = {'input': calibration[0]}
    expected = run_graphs([fp32], feed, tmp_path)[0]
    bound = 0.05 * np.abs(expected).max()
    here = run_graphs(list(files.values()), feed, tmp_path)
    emulated = dict(
        zip(files, run_graphs(list(files.values()), feed, tmp_path,
                              AVX2_CPU)))
    for (name, output), native in zip(emulated.items(), here):
        if name in MODES:
            np.testing.assert_allclose(
                output, native, rtol=0, atol=1e-5 * bound, err_msg=name)
            assert np.abs(output - expected).max() <= bound, name
    assert np.abs(emulated['static-8bit'] - expected).max() > 2 * bound
