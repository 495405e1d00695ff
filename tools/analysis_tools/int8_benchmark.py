"""Accuracy and CPU speed of INT8 ONNX graphs (``mmtnt.deploy.quantize``)
against the fp32 graph and the eager model.

Accuracy (``--classifier``, ``--segmentor``, ``--detector``, each a
checkpoint of the embedded demo): the demo is exported to ONNX with
dynamic axes (``tools/deployment/pytorch2onnx.py``; classifiers with the
logits as output), quantized in both modes (the static mode calibrated on
``--calibration-images`` training images through the test pipeline, so
apart from the evaluated ones), and the fp32, dynamic and static graphs
run on the same preprocessed test images, scored by the config's own
evaluator:

- the Fashion-MNIST TNT (``configs/demo/tnt-demo_1xb128_fashion-mnist.py``):
  top-1 on the test set (``--test-images`` limits it);
- the UperNet PCPVT demo: mIoU on the demo scenes' validation set;
- the RetinaNet PCPVT demo: COCO bbox AP50 on the same scenes (the graph
  takes one image, ``mmtnt.deploy.DetectorGraph``).

``--scenes`` is the folder of ``tools/dataset_converters/
make_demo_scenes.py`` (default ``data/demo_scenes``).

Speed (``--speed-configs``, by default the S-size ImageNet classifiers
of TNT, PyramidTNT, PCPVT and SVT, random weights; calibrated on two
random standard-normal images, which do not change the timings): one
forward of a batch of each ``--batch-sizes`` at the config's test size with
``--threads`` threads, for ONNX Runtime fp32, dynamic INT8 and static INT8
and for the eager model with ``mmtnt.accelerate_for_cpu`` in
``torch.inference_mode``. They take turns for ``--rounds`` rounds after
``--warmup`` runs, the order rotating every round (as
``onnx_benchmark.py``); the table gives median milliseconds (fastest-
slowest) and the speed-ups as the median (lowest-highest) of the
per-round ratios, so that load changing between rounds cancels.

The INT8 graphs store 7-bit weights (``quantize_onnx``'s default
``reduce_range=True``, which no x86-64 CPU saturates); ``--full-range``
adds graphs with the full 8-bit weights (``dynamic-8bit``,
``static-8bit``), the fastest setting, to compare their accuracy and
speed on the machine at hand. The CPU's integer instruction sets (AVX2,
AVX-512, VNNI) are printed with the tables: 8-bit weights saturate on
CPUs with AVX2 and no VNNI.

The tables are printed in markdown. Machine-specific numbers belong in the
docs, not in code.

Examples::

    python tools/analysis_tools/int8_benchmark.py \\
        --classifier work_dirs/tnt-demo/epoch_4.pth \\
        --segmentor work_dirs/upernet-demo/iter_2000.pth \\
        --detector work_dirs/retinanet-demo/epoch_30.pth \\
        --scenes data/demo_scenes
    python tools/analysis_tools/int8_benchmark.py \\
        --speed-configs configs/twins/twins-svt-small_8xb128_in1k.py
"""
import argparse
import copy
import gc
import os.path as osp
import statistics
import sys
import tempfile

import numpy as np
import torch
from mmengine.config import Config

from mmtnt.accel import accelerate_for_cpu
from mmtnt.deploy.quantize import (MODES, calibration_inputs,
                                   cpu_int8_features, quantize_onnx)

TOOLS = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, osp.join(TOOLS, 'deployment'))
sys.path.insert(0, osp.join(TOOLS, 'analysis_tools'))
import onnx_benchmark  # noqa: E402
import pytorch2onnx  # noqa: E402

#: The demos whose accuracy is measured: config and metric.
DEMOS = dict(
    classifier=('configs/demo/tnt-demo_1xb128_fashion-mnist.py',
                'accuracy/top1', 'Fashion-MNIST top-1 (%)'),
    segmentor=('configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py',
               'mIoU', 'demo scenes mIoU (%)'),
    detector=('configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py',
              'coco/bbox_mAP_50', 'demo scenes bbox AP50'),
)
#: The configs timed by default.
SPEED_CONFIGS = [
    'configs/tnt/tnt-s-p16_16xb64_in1k.py',
    'configs/pyramid_tnt/pyramid-tnt-s_8xb128_in1k-256px.py',
    'configs/twins/twins-pcpvt-small_8xb128_in1k.py',
    'configs/twins/twins-svt-small_8xb128_in1k.py',
]
#: The size the demos are exported at (their images are 32 or 128 pixels;
#: a dynamic export traces at 512 anyway).
DEMO_EXPORT_SIZE = (128, 128)
#: The suffix of the graphs with 8-bit weights (``--full-range``).
FULL_RANGE = '-8bit'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Accuracy and CPU speed of INT8 ONNX graphs.')
    for kind, (config, _, title) in DEMOS.items():
        parser.add_argument(
            f'--{kind}',
            metavar='CHECKPOINT',
            help=f'a checkpoint of {config}: measure its {title}')
    parser.add_argument(
        '--scenes',
        default='data/demo_scenes',
        help='the demo scenes of make_demo_scenes.py (segmentor, detector)')
    parser.add_argument(
        '--calibration-images',
        type=int,
        default=64,
        help='training images that calibrate the static mode')
    parser.add_argument(
        '--test-images',
        type=int,
        help='classifier: the first N test images (default: all)')
    parser.add_argument(
        '--speed-configs',
        nargs='*',
        default=SPEED_CONFIGS,
        help='classification configs to time (none: no timing)')
    parser.add_argument(
        '--batch-sizes',
        type=int,
        nargs='+',
        default=[1, 8],
        help='batches timed')
    parser.add_argument(
        '--threads', type=int, default=2, help='threads of ORT and torch')
    parser.add_argument(
        '--rounds', type=int, default=9, help='timed runs of each')
    parser.add_argument(
        '--warmup', type=int, default=2, help='untimed runs of each first')
    parser.add_argument(
        '--full-range',
        action='store_true',
        help='also quantize with 8-bit weights (reduce_range=False): the '
        'dynamic-8bit and static-8bit graphs')
    parser.add_argument(
        '--work-dir',
        help='where the ONNX files are written (default: a temporary '
        'folder, removed at the end)')
    return parser.parse_args(argv)


def ort_session(onnx_file, threads):
    """An ONNX Runtime CPU session with ``threads`` intra-op threads."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        onnx_file, options, providers=['CPUExecutionProvider'])


def scene_options(config, scenes):
    """``cfg-options`` that point a dense demo at the scenes in
    ``scenes`` (none for other configs), as tests/demo_runs.py does."""
    name = osp.basename(config)
    if 'demo-ade' in name:
        root = osp.join(scenes, 'ade')
        return {
            f'{split}_dataloader.dataset.data_root': root
            for split in ('train', 'val', 'test')
        }
    if 'demo-coco' not in name:
        return {}
    root = osp.join(scenes, 'coco', '')
    ann_file = osp.join(root, 'annotations', 'instances_val.json')
    options = {
        f'{split}_dataloader.dataset.data_root': root
        for split in ('train', 'val', 'test')
    }
    options.update(
        {f'{split}_evaluator.ann_file': ann_file
         for split in ('val', 'test')})
    return options


def detections(session, inputs, data_samples):
    """Run a detector graph image by image (unpadded) and set each data
    sample's ``pred_instances``, boxes scaled back to the original image
    as mmdet's ``predict(rescale=True)``."""
    from mmengine.structures import InstanceData
    for i, sample in enumerate(data_samples):
        height, width = sample.img_shape
        image = inputs[i:i + 1, :, :height, :width]
        boxes, scores, labels = session.run(
            None, {pytorch2onnx.INPUT_NAME: image})[:3]
        scale = np.tile(np.asarray(sample.scale_factor, np.float32), 2)
        sample.pred_instances = InstanceData(
            bboxes=torch.from_numpy(boxes / scale),
            scores=torch.from_numpy(scores),
            labels=torch.from_numpy(labels))
    return data_samples


def predictions(model, session, inputs, data_samples):
    """The data samples with the predictions of an ONNX graph of
    ``model`` on ``inputs``, as the model's ``predict`` sets them."""
    from mmpretrain.models import ImageClassifier
    if pytorch2onnx.is_detector(model):
        return detections(session, inputs, data_samples)
    outputs = torch.from_numpy(
        session.run(None, {pytorch2onnx.INPUT_NAME: inputs})[0])
    if isinstance(model, ImageClassifier):
        return model.head._get_predictions(outputs, data_samples)
    return model.postprocess_result(outputs, data_samples)


def evaluate(cfg, model, sessions, num_images=None):
    """Score ONNX graphs on the same test images with the config's test
    evaluator.

    Args:
        cfg (Config): The demo's config.
        model (nn.Module): The model (its data preprocessor and
            post-processing are used).
        sessions (dict): Name -> ONNX Runtime session.
        num_images (int, optional): The first images of the test set only.

    Returns:
        dict: Name -> the evaluator's metrics.
    """
    from mmengine.evaluator import Evaluator
    from mmengine.runner import Runner
    loader_cfg = copy.deepcopy(cfg.test_dataloader)
    loader_cfg.update(num_workers=0, persistent_workers=False)
    if num_images:
        loader_cfg.dataset.indices = num_images
    loader = Runner.build_dataloader(loader_cfg)
    evaluators = {name: Evaluator(cfg.test_evaluator) for name in sessions}
    for evaluator in evaluators.values():
        evaluator.dataset_meta = loader.dataset.metainfo
    with torch.no_grad():
        for batch in loader:
            data = model.data_preprocessor(batch, False)
            inputs = data['inputs'].numpy()
            for name, session in sessions.items():
                samples = predictions(model, session, inputs,
                                      copy.deepcopy(data['data_samples']))
                evaluators[name].process(samples, batch)
    return {
        name: evaluator.evaluate(len(loader.dataset))
        for name, evaluator in evaluators.items()
    }


def int8_graphs(full_range=False):
    """The names of the INT8 graphs: each mode (7-bit weights), then with
    ``full_range`` each mode with 8-bit weights (``FULL_RANGE``)."""
    return list(MODES) + ([m + FULL_RANGE for m in MODES] if full_range
                          else [])


def quantized_files(fp32, calibration, prefix, full_range=False):
    """Quantize ``fp32`` into each of :func:`int8_graphs`; name -> file,
    fp32 included."""
    files = dict(fp32=fp32)
    for name in int8_graphs(full_range):
        files[name] = f'{prefix}-int8-{name}.onnx'
        quantize_onnx(
            fp32,
            files[name],
            name.replace(FULL_RANGE, ''),
            calibration=calibration,
            reduce_range=not name.endswith(FULL_RANGE))
    return files


def demo_accuracy(kind, checkpoint, args, work_dir):
    """Export, quantize and evaluate one demo.

    Returns:
        dict: The table's cells: ``demo``, the metric of each graph and
        its change from fp32 in each mode.
    """
    config, metric, title = DEMOS[kind]
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(scene_options(config, args.scenes))
    model = pytorch2onnx.build_model(cfg, checkpoint)
    graph = pytorch2onnx.export_graph(model, logits=True)
    fp32 = osp.join(work_dir, f'{kind}.onnx')
    pytorch2onnx.export_onnx(
        graph,
        fp32,
        DEMO_EXPORT_SIZE,
        channels=pytorch2onnx.input_channels(model),
        dynamic=True)
    batch_size = 32 if kind == 'classifier' else 1
    calibration = calibration_inputs(
        cfg, args.calibration_images, split='train', batch_size=batch_size)
    files = quantized_files(fp32, calibration, osp.join(work_dir, kind),
                            args.full_range)
    sessions = {
        name: ort_session(f, args.threads)
        for name, f in files.items()
    }
    metrics = evaluate(cfg, model, sessions,
                       args.test_images if kind == 'classifier' else None)
    values = {name: float(metrics[name][metric]) for name in files}
    row = dict(demo=title)
    digits = 3 if values['fp32'] <= 1 else 2
    for name, value in values.items():
        row[name] = f'{value:.{digits}f}'
    for name in int8_graphs(args.full_range):
        row[f'{name}_change'] = f'{values[name] - values["fp32"]:+.{digits}f}'
    return row


def ratio_text(ratios):
    """``median (lowest-highest)`` of ratios."""
    return (f'{statistics.median(ratios):.2f} '
            f'({min(ratios):.2f}-{max(ratios):.2f})')


def speed_rows(config, args, work_dir):
    """Export, quantize and time one classification config at each batch
    size.

    Returns:
        list[dict]: The table's rows.
    """
    cfg = Config.fromfile(config)
    name = osp.splitext(osp.basename(config))[0]
    shape = onnx_benchmark.test_input_size(cfg)
    torch.manual_seed(0)
    model = pytorch2onnx.build_model(cfg)
    graph = pytorch2onnx.export_graph(model, logits=True)
    fp32 = osp.join(work_dir, name + '.onnx')
    pytorch2onnx.export_onnx(graph, fp32, shape, dynamic=True)
    rng = np.random.default_rng(0)
    calibration = [
        rng.standard_normal((1, 3, *shape), dtype=np.float32)
        for _ in range(2)
    ]
    files = quantized_files(fp32, calibration, osp.join(work_dir, name),
                            args.full_range)
    sessions = {key: ort_session(f, args.threads) for key, f in files.items()}
    accelerated = accelerate_for_cpu(copy.deepcopy(graph))
    rows = []
    for batch in args.batch_sizes:
        inputs = torch.randn(batch, 3, *shape)
        feed = {pytorch2onnx.INPUT_NAME: inputs.numpy()}

        def eager():
            with torch.inference_mode():
                accelerated(inputs)

        runners = {
            key: (lambda session=session: session.run(None, feed))
            for key, session in sessions.items()
        }
        runners['eager'] = eager
        times = onnx_benchmark.time_runs(runners, args.warmup, args.rounds)
        row = dict(config=name, batch=batch)
        for key, seconds in times.items():
            row[key] = onnx_benchmark.format_times(seconds)
        for graph in int8_graphs(args.full_range):
            row[f'{graph}_fp32'] = ratio_text(
                [f / q for f, q in zip(times['fp32'], times[graph])])
            row[f'{graph}_eager'] = ratio_text(
                [e / q for e, q in zip(times['eager'], times[graph])])
        rows.append(row)
    return rows


def accuracy_columns(full_range=False):
    """The accuracy table's (key, title) columns."""
    graphs = int8_graphs(full_range)
    return ([('demo', 'demo'), ('fp32', 'ORT fp32')] +
            [(g, f'INT8 {g}') for g in graphs] +
            [(f'{g}_change', f'{g} - fp32') for g in graphs])


def speed_columns(full_range=False):
    """The speed table's (key, title) columns."""
    graphs = int8_graphs(full_range)
    return ([('config', 'config'), ('batch', 'batch'),
             ('fp32', 'ORT fp32 ms')] +
            [(g, f'INT8 {g} ms') for g in graphs] +
            [('eager', 'eager + accel ms')] +
            [(f'{g}_fp32', f'{g}: x ORT fp32') for g in graphs] +
            [(f'{g}_eager', f'{g}: x eager') for g in graphs])


def describe_cpu():
    """One line on the CPU's 8-bit integer instruction sets."""
    cpu = cpu_int8_features()
    features = ', '.join(cpu['features']) or 'unknown'
    risk = {True: '8-bit weights saturate here',
            False: 'no saturation here',
            None: 'saturation unknown'}[cpu['saturates']]
    return f'CPU: {features} ({risk})'


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    accuracy_table = accuracy_columns(args.full_range)
    speed_table = speed_columns(args.full_range)
    print(describe_cpu(), flush=True)
    accuracy, speed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work_dir = args.work_dir or tmp
        for kind in DEMOS:
            checkpoint = getattr(args, kind)
            if checkpoint:
                accuracy.append(
                    demo_accuracy(kind, checkpoint, args, work_dir))
                print(onnx_benchmark.markdown_table(accuracy[-1:],
                                                    accuracy_table),
                      flush=True)
        for config in args.speed_configs:
            rows = speed_rows(config, args, work_dir)
            speed.extend(rows)
            gc.collect()  # the model, its copy and the sessions
            print(onnx_benchmark.markdown_table(rows, speed_table),
                  flush=True)
    if accuracy:
        print('\nAccuracy of the same test images (static mode calibrated on '
              f'{args.calibration_images} training images):\n')
        print(onnx_benchmark.markdown_table(accuracy, accuracy_table))
    if speed:
        print(f'\n{args.threads} threads, median (fastest-slowest) of '
              f'{args.rounds} runs; speed-ups: median (lowest-highest) of '
              'the per-round ratios, above 1 = INT8 faster:\n')
        print(onnx_benchmark.markdown_table(speed, speed_table))


if __name__ == '__main__':
    main()
