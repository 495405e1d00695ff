"""Time and memory of a Mask R-CNN on the CPU: its ONNX graph in ONNX
Runtime and in OpenVINO (float32), masks per RoI pasted by
:func:`mmtnt.deploy.masks.paste_masks`, against mmdet's eager ``predict``.

Each side runs in a process of its own (a worker), which loads the model
(or the ONNX Runtime session) and then waits for the parent's orders. The
parent has them run one image in interleaved rounds
(:func:`benchmarks.measure.interleaved_rounds`), so that a change of
machine load hits all alike; the table gives each graph's speed-up over
eager mmdet as the median (range) of the per-round ratios. A worker's
memory is its peak resident memory (``VmHWM``) over all its runs, warm-up
included, above its resident memory once the model is loaded.

The image is preprocessed as the config's data preprocessor does it
(normalised, padded to ``pad_size_divisor``), and every side gets the same
batch input and ``img_shape``; the detections are those of
``predict(..., rescale=False)``, and each graph's are matched with mmdet's
at the end.
The graph is exported as :func:`mmtnt.deploy.export_onnx` exports any
detector (attention in parts: ``attn_impl='parts'``, set by
:func:`mmtnt.deploy.graphs.export_friendly`), and its ONNX Runtime session
runs without ONNX Runtime's memory pattern unless ``--memory-pattern`` is
given
(:func:`mmtnt.deploy.cpu_session`).

Examples::

    python -m benchmarks.mask_rcnn_onnx_benchmark \\
        configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py \\
        epoch_20.pth --shape 800 1333 --rounds 5 --threads 2 \\
        --image data/demo_scenes/coco/val
    python -m benchmarks.mask_rcnn_onnx_benchmark CONFIG CHECKPOINT \\
        --sides openvino mmdet
"""
import argparse
import json
import os
import os.path as osp
import subprocess
import sys
import tempfile
import time
from functools import partial

import numpy as np

from mmtnt.analysis import format_table
from .measure import (interleaved_rounds, ratio_cell, reset_resident_peak,
                      resident_bytes)
from .options import add_timing_options

#: The repository root, from where the workers import this module.
REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
#: The sides, in the order of the first round: the graph in each runtime
#: (:data:`mmtnt.deploy.runtime.BACKENDS`), then eager mmdet.
SIDES = ('onnxruntime', 'openvino', 'mmdet')
#: How the table names each side.
SIDE_LABELS = dict(
    onnxruntime='ONNX Runtime + paste_masks',
    openvino='OpenVINO + paste_masks',
    mmdet='eager mmdet predict')
#: The sides every other is compared with, where they run, by their
#: name in the table.
REFERENCES = dict(mmdet='eager', onnxruntime='ONNX Runtime')


def mosaic(path, shape):
    """An RGB image of ``shape`` (H, W, 3) uint8: an image file resized to
    it, or the images of a folder tiled at their own size, row by row, in
    name order and as often as it takes.

    Examples:
        >>> mosaic('data/demo_scenes/coco/val', (800, 1333)).shape
        (800, 1333, 3)
    """
    from PIL import Image
    height, width = shape
    if not osp.isdir(path):
        image = Image.open(path).convert('RGB').resize((width, height))
        return np.asarray(image)
    files = sorted(
        osp.join(path, name) for name in os.listdir(path)
        if name.lower().endswith(('.jpg', '.jpeg', '.png')))
    if not files:
        raise ValueError(f'No .jpg or .png image in {path}.')
    canvas = np.zeros((height, width, 3), np.uint8)
    top = left = row_height = index = 0
    while top < height:
        tile = np.asarray(Image.open(files[index % len(files)]).convert('RGB'))
        index += 1
        part = tile[:height - top, :width - left]
        canvas[top:top + part.shape[0], left:left + part.shape[1]] = part
        row_height = max(row_height, tile.shape[0])
        left += tile.shape[1]
        if left >= width:
            top, left, row_height = top + row_height, 0, 0
    return canvas


def batch_input(model, image):
    """The batch input (1, 3, H', W') of an RGB image (H, W, 3) and its
    ``img_shape``, as the model's data preprocessor makes them (channel
    order, normalisation, padding to ``pad_size_divisor``)."""
    import torch
    from mmdet.structures import DetDataSample

    # mmdet's pipelines load images as BGR
    pixels = torch.from_numpy(image[..., ::-1].copy()).permute(2, 0, 1)
    sample = DetDataSample(metainfo=dict(img_shape=image.shape[:2]))
    data = model.data_preprocessor(
        dict(inputs=[pixels], data_samples=[sample]), False)
    return data['inputs'], tuple(image.shape[:2])


def build_model(config, checkpoint, score_thr=None, max_per_img=None):
    """The Mask R-CNN of ``config`` with ``checkpoint`` (random weights
    without), its second stage's ``score_thr`` and ``max_per_img``
    changed where given."""
    from mmtnt.analysis import load_config
    from mmtnt.deploy.export import build_model as build_deploy_model
    cfg = load_config(config, scopes=('mmdet', ))
    rcnn = cfg.model.test_cfg.rcnn
    if score_thr is not None:
        rcnn.score_thr = score_thr
    if max_per_img is not None:
        rcnn.max_per_img = max_per_img
    return build_deploy_model(cfg, checkpoint or False)


def prepare(args, work_dir):
    """Write what the workers load into ``work_dir``: the batch input
    (``input.npy``), the settings (``settings.json``) and the ONNX graph
    (``model.onnx``, per-RoI masks, dynamic height and width)."""
    import torch

    from mmtnt.deploy.detection import DetectorGraph
    from mmtnt.deploy.export import export_onnx
    model = build_model(args.config, args.checkpoint, args.score_thr,
                        args.max_per_img)
    if args.image:
        image = mosaic(args.image, args.shape)
    else:
        generator = np.random.default_rng(0)
        image = generator.integers(0, 256, (*args.shape, 3), np.uint8)
    inputs, img_shape = batch_input(model, image)
    np.save(osp.join(work_dir, 'input.npy'), inputs.numpy())
    graph = DetectorGraph(model)
    with open(osp.join(work_dir, 'settings.json'), 'w') as file:
        json.dump(
            dict(config=args.config, checkpoint=args.checkpoint,
                 score_thr=args.score_thr, max_per_img=args.max_per_img,
                 img_shape=img_shape, mask_threshold=graph.mask_threshold,
                 memory_pattern=args.memory_pattern),
            file)
    torch.set_num_threads(args.threads)
    export_onnx(graph, osp.join(work_dir, 'model.onnx'),
                tuple(inputs.shape[2:]), dynamic=True)
    return tuple(inputs.shape)


def side_runner(side, work_dir, threads):
    """A callable that runs the detector once on the work folder's input
    and returns boxes, scores, labels and image masks as NumPy arrays."""
    import torch
    torch.set_num_threads(threads)
    with open(osp.join(work_dir, 'settings.json')) as file:
        settings = json.load(file)
    img_shape = tuple(settings['img_shape'])
    inputs = np.load(osp.join(work_dir, 'input.npy'))
    if side != 'mmdet':
        from mmtnt.deploy.masks import paste_masks
        from mmtnt.deploy.runtime import (IMG_SHAPE_NAME, INPUT_NAME,
                                          cpu_session)
        session = cpu_session(osp.join(work_dir, 'model.onnx'), threads,
                              memory_pattern=settings['memory_pattern'],
                              backend=side)
        feed = {INPUT_NAME: inputs,
                IMG_SHAPE_NAME: np.array(img_shape, np.int64)}

        def run():
            boxes, scores, labels, roi_masks = session.run(None, feed)
            return (boxes, scores, labels,
                    paste_masks(roi_masks, boxes, img_shape,
                                settings['mask_threshold']))

        return run
    from mmdet.structures import DetDataSample
    model = build_model(settings['config'], settings['checkpoint'],
                        settings['score_thr'], settings['max_per_img'])
    inputs = torch.from_numpy(inputs)
    pad_shape = tuple(inputs.shape[2:])
    sample = DetDataSample(
        metainfo=dict(img_shape=img_shape, ori_shape=img_shape,
                      pad_shape=pad_shape, batch_input_shape=pad_shape,
                      scale_factor=(1., 1.)))

    def run():
        with torch.no_grad():
            found = model.predict(inputs, [sample],
                                  rescale=False)[0].pred_instances
        return tuple(
            found[key].numpy()
            for key in ('bboxes', 'scores', 'labels', 'masks'))

    return run


def serve(side, work_dir, threads):
    """The worker: load, say ``ready``, then answer the parent's lines,
    ``run`` (one timed run: its seconds and detections), ``peak`` (the
    bytes above the loaded model at the peak so far) and ``save`` (the
    last detections into ``work_dir``/``SIDE.npz``), until ``quit``."""
    # The answers keep the standard output to themselves: what the
    # libraries print goes to the standard error.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), 'w')
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    run = side_runner(side, work_dir, threads)
    loaded = resident_bytes('VmRSS')
    reset_resident_peak()
    print('ready', file=answers, flush=True)
    found = None
    for line in sys.stdin:
        order = line.strip()
        if order == 'run':
            found = None  # not alive while the next run allocates
            start = time.perf_counter()
            found = run()
            seconds = time.perf_counter() - start
            answer = f'{seconds} {len(found[0])}'
        elif order == 'peak':
            answer = resident_bytes('VmHWM') - loaded
        elif order == 'save':
            np.savez(osp.join(work_dir, f'{side}.npz'), *found)
            answer = 'saved'
        else:
            return
        print(answer, file=answers, flush=True)


class Worker:
    """A worker process of one side (:func:`serve`)."""

    def __init__(self, side, work_dir, threads):
        self.side = side
        env = dict(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(
            filter(None, [REPO, env.get('PYTHONPATH')]))
        self.process = subprocess.Popen(
            [sys.executable, '-m', __spec__.name, '--worker', side,
             '--work-dir', work_dir, '--threads', str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=env)

    def ask(self, order):
        """Send one order and return the worker's answer line."""
        if order is not None:
            self.process.stdin.write(order + '\n')
            self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f'The {self.side} worker stopped '
                               f'(exit code {self.process.wait()}).')
        return answer.strip()

    def close(self):
        self.process.stdin.write('quit\n')
        self.process.stdin.close()
        self.process.wait()


def ask_run(worker):
    """One timed run of a worker: its seconds and detections."""
    seconds, count = worker.ask('run').split()
    return float(seconds), int(count)


def measure(work_dir, threads, warmup, rounds, sides=SIDES):
    """Run the workers of ``sides`` in interleaved rounds.

    Returns:
        dict: Per side ``seconds`` (list), ``detections`` (of the last run)
        and ``peak_bytes`` (above the loaded model).
    """
    workers = {side: Worker(side, work_dir, threads) for side in sides}
    try:
        for worker in workers.values():
            worker.ask(None)  # 'ready'
        runs = interleaved_rounds(
            {side: partial(ask_run, worker)
             for side, worker in workers.items()}, warmup, rounds)
        results = {}
        for side, worker in workers.items():
            results[side] = dict(
                seconds=[seconds for seconds, _ in runs[side]],
                detections=runs[side][-1][1],
                peak_bytes=int(worker.ask('peak')))
            worker.ask('save')
    finally:
        for worker in workers.values():
            worker.close()
    return results


def compare_detections(work_dir, side):
    """How far a graph side's last detections are from mmdet's: a line of
    counts, box and score differences and masks' pixels that differ
    (matched in order)."""
    found = {name: np.load(osp.join(work_dir, f'{name}.npz'))
             for name in (side, 'mmdet')}
    ours, theirs = ([found[name][f'arr_{i}'] for i in range(4)]
                    for name in (side, 'mmdet'))
    if len(ours[0]) != len(theirs[0]):
        return (f'{side}: {len(ours[0])} detections against mmdet\'s '
                f'{len(theirs[0])}')
    line = f'{side}: {len(ours[0])} detections, as mmdet'
    if len(ours[0]):
        line += (f', labels equal: {bool((ours[2] == theirs[2]).all())}, '
                 f'max box diff {np.abs(ours[0] - theirs[0]).max():.3g} px, '
                 f'max score diff {np.abs(ours[1] - theirs[1]).max():.3g}, '
                 f'mask pixels that differ {(ours[3] != theirs[3]).sum()} '
                 f'of {ours[3].sum()}')
    return line


def report(results, shape, threads):
    """The table of :func:`measure`'s results, in Markdown: a row per side,
    with its speed-up over eager mmdet and over ONNX Runtime (per-round
    ratios) where they ran.

    Examples:
        >>> print(report(dict(
        ...     onnxruntime=dict(seconds=[2., 1., 3.], peak_bytes=2**20,
        ...                      detections=5),
        ...     mmdet=dict(seconds=[4., 4., 5.], peak_bytes=2**21,
        ...                detections=5)), (1, 3, 800, 1344), 2))
        Input (1, 3, 800, 1344), 2 threads, 3 rounds
        |  | time (median, min) | eager / this | ONNX Runtime / this | \
peak memory above the loaded model | detections |
        |---|---|---|---|---|---|
        | ONNX Runtime + paste_masks | 2000 ms, 1000 ms | 2.00 (1.67-4.00) \
| 1.00 (1.00-1.00) | 1 MiB | 5 |
        | eager mmdet predict | 4000 ms, 4000 ms | 1.00 (1.00-1.00) | \
0.50 (0.25-0.60) | 2 MiB | 5 |
    """
    references = [side for side in REFERENCES if side in results]
    rows = []
    for side, result in results.items():
        seconds = result['seconds']
        rows.append([
            SIDE_LABELS[side], f'{1000 * np.median(seconds):.0f} ms, '
            f'{1000 * min(seconds):.0f} ms'
        ] + [
            ratio_cell(results[reference]['seconds'], seconds, True)
            for reference in references
        ] + [
            f'{result["peak_bytes"] / 2**20:.0f} MiB',
            str(result['detections'])
        ])
    header = ['', 'time (median, min)'] + [
        f'{REFERENCES[side]} / this' for side in references
    ] + ['peak memory above the loaded model', 'detections']
    rounds = len(next(iter(results.values()))['seconds'])
    return (f'Input {shape}, {threads} threads, {rounds} rounds\n' +
            format_table(header, rows))


def parse_args(argv=None):
    """The options of ``python -m benchmarks.mask_rcnn_onnx_benchmark``
    (and of its workers).

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.

    Returns:
        argparse.Namespace: The options.
    """
    parser = argparse.ArgumentParser(
        description='Time and memory of a Mask R-CNN exported to ONNX '
        '(ONNX Runtime and OpenVINO, per-RoI masks pasted after the graph) '
        'against eager mmdet predict, on the CPU, each in its own process.')
    parser.add_argument('config', nargs='?', help='the Mask R-CNN config')
    parser.add_argument(
        'checkpoint', nargs='?', help='its weights (random without)')
    parser.add_argument(
        '--shape', type=int, nargs=2, default=[800, 1333],
        metavar=('HEIGHT', 'WIDTH'), help='the image size (before padding)')
    parser.add_argument(
        '--image', help='an image file (resized to --shape) or a folder of '
        'images tiled into a mosaic; random pixels without')
    add_timing_options(parser, warmup=1, rounds=5)
    parser.add_argument('--threads', type=int, default=2,
                        help='threads of PyTorch and the runtimes '
                        '(default 2)')
    parser.add_argument(
        '--sides', nargs='+', choices=SIDES, default=list(SIDES),
        help='what is measured (default: all of '
        f'{", ".join(SIDES)}; the graphs are compared with mmdet where it '
        'runs)')
    parser.add_argument('--score-thr', type=float,
                        help="the second stage's score threshold "
                        '(default: the config\'s)')
    parser.add_argument('--max-per-img', type=int,
                        help='the most detections (default: the config\'s)')
    parser.add_argument(
        '--memory-pattern', action='store_true',
        help="turn ONNX Runtime's memory pattern on (off by default: it "
        'plans one block for all intermediate tensors, more memory for a '
        'detector)')
    parser.add_argument('--work-dir', help='where the input and the ONNX '
                        'graph go (default: a temporary folder)')
    parser.add_argument('--worker', choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is None and args.config is None:
        parser.error('the config is required')
    return args


def main(argv=None):
    """Measure both sides and print the table (or serve as a worker).

    Args:
        argv (list[str], optional): Instead of ``sys.argv[1:]``.
    """
    args = parse_args(argv)
    if args.worker is not None:
        serve(args.worker, args.work_dir, args.threads)
        return
    with tempfile.TemporaryDirectory() as temporary:
        work_dir = args.work_dir or temporary
        os.makedirs(work_dir, exist_ok=True)
        shape = prepare(args, work_dir)
        results = measure(work_dir, args.threads, args.warmup, args.rounds,
                          args.sides)
        print(report(results, shape, args.threads))
        if 'mmdet' in args.sides:
            for side in args.sides:
                if side != 'mmdet':
                    print(compare_detections(work_dir, side))


if __name__ == '__main__':
    main()
