"""INT8 graphs of every task (``mmtnt.deploy.quantize``) and ONNX Runtime's
transformer fusions before quantizing (``benchmarks.optimize``).

* The UperNet PCPVT, RetinaNet and Mask R-CNN demos of the session's short
  runs (``short_runs``, shared with test_dense_demo.py), exported at the
  demo scenes' 128x128, are quantized in both modes (static: calibrated on
  ``CALIBRATION_IMAGES`` training scenes). Both INT8 graphs run in ONNX
  Runtime, the detectors' with their TopK, NonMaxSuppression, RoiAlign and
  Gather nodes between quantized ones, keep float outputs (Mask R-CNN's
  ``roi_masks`` included), and keep the demo's metric within ``MAX_DROP``
  points of the fp32 graph on the validation scenes, all three scored on
  the same images by the config's evaluator
  (:func:`mmtnt.deploy.evaluate.evaluate_graphs`): mIoU, bbox AP50 and
  Mask R-CNN's segm AP50.
* :func:`build_data_preprocessor` builds the data preprocessor and nothing
  else of a detector, and :func:`calibration_inputs` leaves the default
  scope as it found it.
* :func:`optimize_onnx` on the Fashion-MNIST TNT demo with random weights:
  the fused nodes it reports are in the graph, its outputs equal the
  original's within float rounding, and :func:`quantize_onnx` quantizes
  the fused graph.
"""

import numpy as np
import pytest
import torch
from demo_runs import (DEMO_GRAPH_SIZE, data_options, short_run_graph,
                       short_run_group)
from mmengine.config import Config
from onnx_graphs import op_types

from benchmarks.optimize import FUSIONS, optimize_onnx
from mmtnt.deploy import build_model, export_onnx
from mmtnt.deploy.evaluate import evaluate_graphs
from mmtnt.deploy.quantize import (MODES, build_data_preprocessor,
                                   calibration_inputs, quantize_onnx)
from mmtnt.deploy.runtime import INPUT_NAME, cpu_session

UPERNET = 'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
RETINANET = 'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
MASK_RCNN = 'configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py'
TNT_DEMO = 'configs/demo/tnt-demo_1xb128_fashion-mnist.py'
#: The metrics compared for each dense demo's short run, in points: mIoU
#: is in percent, COCO's APs in 0..1.
DEMOS = {
    UPERNET: {'mIoU': 1},
    RETINANET: {'coco/bbox_mAP_50': 100},
    MASK_RCNN: {'coco/bbox_mAP_50': 100, 'coco/segm_mAP_50': 100},
}
#: Training scenes that calibrate the static mode. With 8 the static Mask
#: R-CNN lost 1.0 segm AP50 point, with 32 0.5 (its bbox AP50 gained 0.5
#: either way); its segm AP over IoU 0.5-0.95 did not drop with either.
CALIBRATION_IMAGES = 32
#: The largest drop from fp32 accepted, in points (measured on the 50
#: validation scenes: UperNet mIoU -0.02 (dynamic) and -0.12 (static);
#: RetinaNet bbox AP50 0 and +0.2; Mask R-CNN bbox AP50 +1.0 and +0.4, segm
#: AP50 -0.2 and -0.5).
MAX_DROP = 1.0
#: The fp32 metric below which a comparison says little: about half of
#: what the short runs reach (mIoU 47.5, AP50 0.41 and 0.56).
MIN_FP32 = {'mIoU': 30.0, 'coco/bbox_mAP_50': 0.2, 'coco/segm_mAP_50': 0.2}
#: The op types that show each mode quantized the graph.
QUANTIZED_OPS = dict(dynamic='MatMulInteger', static='QuantizeLinear')
#: The detection ops the INT8 detectors run between quantized nodes.
DETECTION_OPS = {
    UPERNET: (),
    RETINANET: ('TopK', 'NonMaxSuppression', 'Gather'),
    MASK_RCNN: ('TopK', 'NonMaxSuppression', 'Gather', 'RoiAlign')
}


@pytest.mark.slow
@pytest.mark.parametrize(
    'config',
    [pytest.param(c, marks=short_run_group(c)) for c in DEMOS],
    ids=['upernet', 'retinanet', 'mask_rcnn'])
def test_int8_demo_holds_its_metric(config, demo_scenes, short_runs,
                                    tmp_path_factory, tmp_path):
    fp32 = short_run_graph(config, demo_scenes, short_runs,
                           tmp_path_factory)[0]
    cfg_options = dict(
        option.split('=', 1)
        for option in data_options(config, demo_scenes))
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(cfg_options)
    calibration = calibration_inputs(
        cfg, CALIBRATION_IMAGES, split='train')
    files = dict(fp32=fp32)
    for mode in MODES:
        files[mode] = str(tmp_path / f'{mode}.onnx')
        quantize_onnx(fp32, files[mode], mode, calibration)
        ops = op_types(files[mode])
        assert ops[QUANTIZED_OPS[mode]] > 0, (mode, ops)
        assert all(ops[op] for op in DETECTION_OPS[config]), (mode, ops)
    expected = [(o.name, o.type) for o in cpu_session(fp32).get_outputs()]
    for mode in MODES:
        outputs = cpu_session(files[mode]).get_outputs()
        assert [(o.name, o.type) for o in outputs] == expected, mode
    metrics = evaluate_graphs(
        config, files, num_threads=1, cfg_options=cfg_options)
    for name, scale in DEMOS[config].items():
        values = {graph: float(m[name]) for graph, m in metrics.items()}
        print(f'{config} {name}: {values}')
        assert values['fp32'] >= MIN_FP32[name], values
        for mode in MODES:
            drop = (values['fp32'] - values[mode]) * scale
            assert drop <= MAX_DROP + 1e-6, (name, mode, values)


class Recorder:
    """Records the types that ``MODELS.build`` is asked for."""

    def __init__(self, build):
        self.build, self.types = build, []

    def __call__(self, cfg, *args, **kwargs):
        self.types.append(cfg['type'])
        return self.build(cfg, *args, **kwargs)


@pytest.mark.parametrize('config, expected', [
    (RETINANET, 'DetDataPreprocessor'),
    (MASK_RCNN, 'DetDataPreprocessor'),
    (UPERNET, 'SegDataPreProcessor'),
    (TNT_DEMO, 'mmpretrain.ClsDataPreprocessor'),
])
def test_build_data_preprocessor_builds_only_it(config, expected,
                                                monkeypatch):
    """Only the preprocessor is built (no detector), under the config's
    scope; the classifier's, whose config gives no type, gets the one
    ``ImageClassifier`` would give it, with the config's mean."""
    from mmengine.registry import MODELS, DefaultScope
    cfg = Config.fromfile(config)
    recorder = Recorder(MODELS.build)
    monkeypatch.setattr(MODELS, 'build', recorder)
    with DefaultScope.overwrite_default_scope('mmengine'):
        preprocessor = build_data_preprocessor(cfg)
        assert DefaultScope.get_current_instance().scope_name == 'mmengine'
    assert recorder.types == [expected]
    assert not preprocessor.training
    mean = cfg.get('data_preprocessor', cfg.model.get('data_preprocessor'))
    torch.testing.assert_close(preprocessor.mean.flatten(),
                               torch.tensor(mean['mean']))


@short_run_group(RETINANET)
def test_calibration_inputs_leave_the_scope_alone(demo_scenes):
    from mmengine.registry import DefaultScope
    cfg = Config.fromfile(RETINANET)
    cfg.merge_from_dict(
        dict(
            option.split('=', 1)
            for option in data_options(RETINANET, demo_scenes)))
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        arrays = calibration_inputs(cfg, 2, split='train')
        assert DefaultScope.get_current_instance().scope_name == 'mmpretrain'
    assert [a.shape for a in arrays] == [(1, 3, *DEMO_GRAPH_SIZE)] * 2


@pytest.fixture(scope='module')
def tnt_graph(tmp_path_factory):
    """The Fashion-MNIST TNT demo with random weights as an fp32 graph of
    logits, batch 4."""
    torch.manual_seed(0)
    model = build_model(TNT_DEMO, checkpoint=False)
    onnx_file = str(tmp_path_factory.mktemp('tnt') / 'tnt.onnx')
    export_onnx(model, onnx_file, (32, 32), batch_size=4, logits=True)
    return onnx_file


def tnt_logits(onnx_file, seed=0):
    feed = np.random.default_rng(seed).standard_normal(
        (4, 1, 32, 32), dtype=np.float32)
    return cpu_session(onnx_file, 1).run(None, {INPUT_NAME: feed})[0]


@pytest.mark.slow
def test_optimized_graph_equals_the_original(tnt_graph, tmp_path):
    out = str(tmp_path / 'optimized.onnx')
    fused = optimize_onnx(tnt_graph, out)
    ops = op_types(out)
    print(f'fused: {fused}')
    assert fused['SkipLayerNormalization'] > 0 and fused['BiasGelu'] > 0
    for op_type, count in fused.items():
        assert ops[op_type] == count, (op_type, ops)
    assert ops['Add'] < op_types(tnt_graph)['Add']
    expected = tnt_logits(tnt_graph)
    np.testing.assert_allclose(
        tnt_logits(out), expected, rtol=0, atol=1e-5 * np.abs(expected).max())

    fused = optimize_onnx(tnt_graph, out, fusions=['layer_norm', 'gelu'])
    assert 'SkipLayerNormalization' not in fused and 'BiasGelu' not in fused

    int8 = str(tmp_path / 'int8.onnx')
    optimize_onnx(tnt_graph, out)
    quantize_onnx(out, int8, 'dynamic')
    ops = op_types(int8)
    assert ops['SkipLayerNormalization'] > 0 and ops['MatMulInteger'] > 0
    logits = tnt_logits(int8)
    error = np.abs(logits - expected).max() / np.abs(expected).max()
    assert error < 0.1, error


def test_optimize_errors(tmp_path):
    missing = str(tmp_path / 'missing.onnx')
    out = str(tmp_path / 'out.onnx')
    with pytest.raises(ValueError, match='Unknown fusions'):
        optimize_onnx(missing, out, fusions=['layer_norm', 'group_norm'])
    with pytest.raises(ValueError, match='opt_level must be one of'):
        optimize_onnx(missing, out, opt_level=2)
    with pytest.raises(FileNotFoundError, match='missing.onnx'):
        optimize_onnx(missing, out)
    assert 'attention' in FUSIONS


def roi_graph(path):
    """An ONNX graph that pools one box of its input (1, 2, H, W) with
    ``RoiAlign`` to 2x2 and multiplies the 8 values by a weight."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    weights = [
        numpy_helper.from_array(np.array([[0, 0, 3, 3]], np.float32),
                                'rois'),
        numpy_helper.from_array(np.zeros(1, np.int64), 'batch'),
        numpy_helper.from_array(np.ones((8, 3), np.float32), 'weight')
    ]
    nodes = [
        helper.make_node(
            'RoiAlign', ['input', 'rois', 'batch'], ['pooled'],
            output_height=2, output_width=2),
        helper.make_node('Flatten', ['pooled'], ['flat']),
        helper.make_node('MatMul', ['flat', 'weight'], ['output'])
    ]
    graph = helper.make_graph(
        nodes, 'roi',
        [helper.make_tensor_value_info('input', TensorProto.FLOAT,
                                       [1, 2, 'H', 'W'])],
        [helper.make_tensor_value_info('output', TensorProto.FLOAT,
                                       [1, 3])], weights)
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)]),
        str(path))
    return str(path)


@pytest.mark.parametrize('method', ['percentile', 'entropy'])
def test_histogram_calibration_errors(tmp_path, method):
    """ONNX Runtime's histogram calibration stacks each tensor over the
    calibration inputs: inputs of two sizes, and a graph with RoiAlign
    (a two-stage detector's RoI heads), are refused with the reason."""
    fp32 = roi_graph(tmp_path / 'roi.onnx')
    out = str(tmp_path / 'out.onnx')
    sizes = [np.zeros((1, 2, 4, 4), np.float32)] * 2
    with pytest.raises(ValueError, match='inputs of one shape'):
        quantize_onnx(fp32, out, 'static',
                      sizes[:1] + [np.zeros((1, 2, 6, 4), np.float32)],
                      calibrate_method=method)
    with pytest.raises(ValueError, match='two-stage detector'):
        quantize_onnx(fp32, out, 'static', sizes, calibrate_method=method)
    quantize_onnx(fp32, out, 'static', sizes, keep_boundaries=False)
    assert op_types(out)['QuantizeLinear'] > 0
