"""Evaluating deployed graphs: an ONNX graph (fp32 or INT8) run by ONNX
Runtime or OpenVINO (fp32, bf16, INT8) over a config's test dataloader and
scored by the config's test evaluator, as ``tools/test.py`` scores the
PyTorch model.

The graph's outputs become the data samples of the model's ``predict``
(:class:`ClassifierPredictions`, :class:`SegmentorPredictions`,
:class:`DetectorPredictions`).
"""
import copy
import os.path as osp
import time

import numpy as np
import torch

from .runtime import IMG_SHAPE_NAME, INPUT_NAME, cpu_session

#: The tasks, by the config's ``default_scope``.
TASKS = dict(mmpretrain='classifier', mmseg='segmentor', mmdet='detector')
#: The outputs a graph of each task starts with (a classifier's: one of
#: them).
TASK_OUTPUTS = dict(
    classifier=('scores', 'logits'),
    segmentor=('seg_logits', ),
    detector=('boxes', 'scores', 'labels'))


def evaluate_onnx(config,
                  onnx_file,
                  num_threads=None,
                  cfg_options=None,
                  num_images=None,
                  backend='onnxruntime',
                  precision='fp32'):
    """Score an ONNX graph on a config's test set with its test evaluator.

    Args:
        config (str | Config): The config the graph was exported from (or one
            that inherits it, with the data to test on).
        onnx_file (str): The graph, fp32 or INT8.
        num_threads (int, optional): The runtime's intra-op threads.
        cfg_options (dict, optional): Merged into the config.
        num_images (int, optional): Only the first images of the test set.
        backend (str): ``'onnxruntime'`` or ``'openvino'``
            (:func:`~mmtnt.deploy.cpu_session`).
        precision (str): ``'fp32'``, ``'bf16'`` or ``'int8'`` (OpenVINO's
            IR next to ``onnx_file``).

    Returns:
        dict: The evaluator's metrics, also logged as ``tools/test.py`` does.

    Examples:
        >>> metrics = evaluate_onnx(  # doctest: +SKIP
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py', 'tnt.onnx',
        ...     backend='openvino', precision='bf16')
    """
    return evaluate_graphs(config, dict(onnx=onnx_file), num_threads,
                           cfg_options, num_images, backend,
                           precision)['onnx']


def evaluate_graphs(config,
                    onnx_files,
                    num_threads=None,
                    cfg_options=None,
                    num_images=None,
                    backend='onnxruntime',
                    precision='fp32'):
    """Score several graphs of one model (fp32 and INT8, say) on the same test
    images, loaded once: :func:`evaluate_onnx` of each of ``onnx_files``
    (name -> ONNX file, or -> ``(ONNX file, backend, precision)`` to run
    that one otherwise than ``backend`` and ``precision`` say).

    Returns:
        dict: Name -> the evaluator's metrics, each logged after its name.
    """
    from mmengine.logging import print_log
    from mmengine.registry import DefaultScope
    cfg = load_test_config(config, cfg_options)
    runs = {
        name: (run, backend, precision) if isinstance(run, str) else run
        for name, run in onnx_files.items()
    }
    for onnx_file, _, _ in runs.values():
        if not osp.isfile(onnx_file):
            raise FileNotFoundError(f'ONNX file not found: {onnx_file}')
    sessions = {
        name: cpu_session(onnx_file, num_threads, backend=run_backend,
                          precision=run_precision)
        for name, (onnx_file, run_backend, run_precision) in runs.items()
    }
    for session in sessions.values():
        check_graph_outputs(session, TASKS[cfg.default_scope])
    check_test_files(cfg)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        results = run_graphs(cfg, sessions, num_images)
    processor = cfg.get('log_processor', {})
    for name, (metrics, seconds) in results.items():
        line = format_metrics(metrics, seconds, processor.get('by_epoch',
                                                              True),
                              processor.get('num_digits', 4))
        print_log(f'{name}: {line}' if len(results) > 1 else line,
                  logger='current')
    return {name: metrics for name, (metrics, _) in results.items()}


def load_test_config(config, cfg_options=None):
    """A config (a file, or a copy) with ``cfg_options`` merged, checked for a
    known ``default_scope``, a test dataloader and a test evaluator."""
    from mmengine.config import Config
    if isinstance(config, Config):
        cfg = copy.deepcopy(config)
    elif not osp.isfile(config):
        raise FileNotFoundError(f'Config file not found: {config}')
    else:
        cfg = Config.fromfile(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if cfg.get('default_scope') not in TASKS:
        raise ValueError(
            "The config's default_scope must be 'mmpretrain' (classifiers), "
            "'mmseg' (segmentors) or 'mmdet' (detectors), got "
            f'{cfg.get("default_scope")!r}.')
    for key in ('test_dataloader', 'test_evaluator'):
        if not cfg.get(key):
            raise ValueError(
                f'The config has no {key}: a graph is scored on the test '
                'set, with the test evaluator, of its config.')
    return cfg


def check_test_files(cfg):
    """Raise a FileNotFoundError naming the config key to set for a missing
    test dataset path or evaluator annotation file."""
    from mmtnt.utils import check_data_paths
    check_data_paths(cfg, ('test_dataloader', ))
    evaluator = cfg.get('test_evaluator') or {}
    metrics = evaluator if isinstance(evaluator, list) else [evaluator]
    for i, metric in enumerate(metrics):
        ann_file = metric.get('ann_file')
        where = 'test_evaluator' + (f'[{i}]' if len(metrics) > 1 else '')
        if (isinstance(ann_file, str) and '://' not in ann_file
                and not osp.isfile(ann_file)):
            raise FileNotFoundError(
                f'Annotation file "{ann_file}" (from {where}.ann_file) does '
                f'not exist: point {where}.ann_file at the test set\'s '
                'annotations.')


def run_graphs(cfg, sessions, num_images=None):
    """The loop of :func:`evaluate_graphs`: name -> (metrics, ``batches``,
    ``data_time`` and ``time`` per batch)."""
    from .quantize import build_data_preprocessor, build_loader
    select = None if num_images is None else (
        lambda length: range(min(num_images, length)))
    loader, metainfo = build_loader(cfg.test_dataloader, select)
    preprocessor = build_data_preprocessor(cfg)
    task = TASKS[cfg.default_scope]
    predict = dict(
        classifier=ClassifierPredictions,
        segmentor=SegmentorPredictions,
        detector=DetectorPredictions)[task](cfg)
    evaluators = {}
    for name in sessions:
        evaluators[name] = build_evaluator(cfg.test_evaluator)
        evaluators[name].dataset_meta = metainfo
    data_time, graph_times = 0., dict.fromkeys(sessions, 0.)
    start = time.perf_counter()
    with torch.no_grad():
        for batch in loader:
            data = preprocessor(batch, False)
            inputs = data['inputs'].numpy().astype(np.float32, copy=False)
            data_time += time.perf_counter() - start
            for name, session in sessions.items():
                start = time.perf_counter()
                samples = predict(session, inputs,
                                  copy.deepcopy(data['data_samples']))
                evaluators[name].process(samples, batch)
                graph_times[name] += time.perf_counter() - start
            start = time.perf_counter()
    batches = max(len(loader), 1)
    return {
        name: (evaluator.evaluate(len(loader.dataset)),
               dict(batches=len(loader),
                    data_time=data_time / batches,
                    time=(data_time + graph_times[name]) / batches))
        for name, evaluator in evaluators.items()
    }


def build_evaluator(evaluator_cfg):
    """An evaluator as mmengine's ``Runner.build_evaluator`` builds it."""
    from mmengine.evaluator import Evaluator
    from mmengine.registry import EVALUATOR
    evaluator_cfg = copy.deepcopy(evaluator_cfg)
    if isinstance(evaluator_cfg, dict) and 'metrics' in evaluator_cfg:
        evaluator_cfg.setdefault('type', 'Evaluator')
        return EVALUATOR.build(evaluator_cfg)
    return Evaluator(evaluator_cfg)


def check_graph_outputs(session, task):
    """Raise a ValueError unless the graph's outputs are ``task``'s."""
    names = [output.name for output in session.get_outputs()]
    expected = TASK_OUTPUTS[task]
    classifier = task == 'classifier'
    if classifier:
        fits = len(names) == 1 and names[0] in expected
    else:
        fits = tuple(names[:len(expected)]) == expected
    described = (' or ' if classifier else ', ').join(map(repr, expected))
    if not fits:
        raise ValueError(
            f"The graph's outputs are {names}, not those of a {task} graph "
            f'of mmtnt.deploy.export_onnx ({described}): was it exported '
            'from a model of this config\'s task?')


def check_graph_input(session, shape):
    """Raise a ValueError when a graph cannot take images of ``shape``
    (N, C, H, W): other channels, or another fixed size."""
    expected = graph_input_shape(session)
    channels = expected[1]
    if channels is not None and channels != shape[1]:
        raise ValueError(
            f'The graph takes {channels}-channel images, but the config\'s '
            f'data preprocessor gives {shape[1]} channels: was the graph '
            'exported from this config?')
    if any(size is not None and size != actual
           for size, actual in zip(expected[2:], shape[2:])):
        fixed = 'x'.join('?' if s is None else str(s) for s in expected[2:])
        raise ValueError(
            f'The graph takes {fixed} images (a fixed size), but the '
            f'config\'s test data gives {shape[2]}x{shape[3]}: export it with '
            'dynamic axes (export_onnx(..., dynamic=True), pytorch2onnx.py '
            '--dynamic-export) or at that size.')


def graph_input_shape(session):
    """The image input's (N, C, H, W), None for a dynamic axis."""
    shape = session.get_inputs()[0].shape
    return tuple(size if isinstance(size, int) else None for size in shape)


def run_batched(session, inputs):
    """A classifier or segmentor graph's first output on a batch, run in parts
    of the graph's fixed batch size where it has one."""
    check_graph_input(session, inputs.shape)
    batch = graph_input_shape(session)[0]
    if batch is None or batch == len(inputs):
        return session.run(None, {INPUT_NAME: inputs})[0]
    outputs = []
    for start in range(0, len(inputs), batch):
        part = inputs[start:start + batch]
        count = len(part)
        if count < batch:
            part = np.concatenate(
                [part, np.repeat(part[-1:], batch - count, axis=0)])
        outputs.append(session.run(None, {INPUT_NAME: part})[0][:count])
    return np.concatenate(outputs)


class ClassifierPredictions:
    """``pred_score`` and ``pred_label`` of a classifier graph, set by the
    config's head as mmpretrain's ``predict`` sets them.

    Args:
        cfg (Config): The full config, under its scope.
    """

    def __init__(self, cfg):
        from mmengine.registry import MODELS
        from mmpretrain.models.heads import MultiLabelClsHead
        self.head = MODELS.build(copy.deepcopy(cfg.model.head))
        self.multi_label = isinstance(self.head, MultiLabelClsHead)

    def __call__(self, session, inputs, data_samples):
        outputs = torch.from_numpy(run_batched(session, inputs))
        if session.get_outputs()[0].name == 'scores':
            outputs = outputs.logit() if self.multi_label else outputs.log()
        return self.head._get_predictions(outputs, data_samples)


class SegmentorPredictions:
    """``seg_logits`` and ``pred_sem_seg`` of a segmentor graph, as mmseg's
    ``EncoderDecoder.predict`` sets them (whole or sliding-window inference).

    Args:
        cfg (Config): The full config.
    """

    def __init__(self, cfg):
        decode_head = cfg.model.decode_head
        if isinstance(decode_head, list):  # cascades: the last head's
            decode_head = decode_head[-1]
        self.align_corners = decode_head.get('align_corners', False)
        threshold = decode_head.get('threshold')
        self.threshold = 0.3 if threshold is None else threshold
        self.test_cfg = cfg.model.get('test_cfg') or {}

    def __call__(self, session, inputs, data_samples):
        if self.test_cfg.get('mode', 'whole') == 'slide':
            seg_logits = slide_logits(session, inputs,
                                      self.test_cfg['crop_size'],
                                      self.test_cfg['stride'])
        else:
            seg_logits = torch.from_numpy(run_batched(session, inputs))
        return self.postprocess(seg_logits, data_samples)

    def postprocess(self, seg_logits, data_samples):
        """mmseg's ``BaseSegmentor.postprocess_result`` on ``seg_logits``."""
        from mmengine.structures import PixelData
        from mmseg.models.utils import resize
        height, width = seg_logits.shape[2:]
        for i, sample in enumerate(data_samples):
            meta = sample.metainfo
            left, right, top, bottom = meta.get(
                'img_padding_size', meta.get('padding_size', [0] * 4))
            logits = seg_logits[i:i + 1, :, top:height - bottom,
                                left:width - right]
            if meta.get('flip'):
                logits = logits.flip(
                    dims=(3, ) if meta['flip_direction'] ==
                    'horizontal' else (2, ))
            logits = resize(
                logits,
                size=meta['ori_shape'],
                mode='bilinear',
                align_corners=self.align_corners,
                warning=False).squeeze(0)
            if logits.shape[0] > 1:
                prediction = logits.argmax(dim=0, keepdim=True)
            else:
                logits = logits.sigmoid()
                prediction = (logits > self.threshold).to(logits)
            sample.set_data(
                dict(
                    seg_logits=PixelData(data=logits),
                    pred_sem_seg=PixelData(data=prediction)))
        return data_samples


def slide_logits(session, inputs, crop_size, stride):
    """Sliding-window logits as mmseg's ``EncoderDecoder.slide_inference``
    computes them, overlaps averaged."""
    (crop_h, crop_w), (stride_h, stride_w) = crop_size, stride
    height, width = inputs.shape[2:]
    rows = max(height - crop_h + stride_h - 1, 0) // stride_h + 1
    cols = max(width - crop_w + stride_w - 1, 0) // stride_w + 1
    logits, counts = None, torch.zeros(len(inputs), 1, height, width)
    for row in range(rows):
        for col in range(cols):
            y2 = min(row * stride_h + crop_h, height)
            x2 = min(col * stride_w + crop_w, width)
            y1, x1 = max(y2 - crop_h, 0), max(x2 - crop_w, 0)
            window = np.ascontiguousarray(inputs[:, :, y1:y2, x1:x2])
            crop = torch.from_numpy(run_batched(session, window))
            if logits is None:
                logits = crop.new_zeros(len(inputs), crop.shape[1], height,
                                        width)
            logits[:, :, y1:y2, x1:x2] += crop
            counts[:, :, y1:y2, x1:x2] += 1
    return logits / counts


class DetectorPredictions:
    """``pred_instances`` of a detector graph, as mmdet's
    ``predict(rescale=True)`` sets them.

    Args:
        cfg (Config): The full config.
    """

    def __init__(self, cfg):
        rcnn = (cfg.model.get('test_cfg') or {}).get('rcnn') or {}
        self.mask_threshold = rcnn.get('mask_thr_binary', 0.5)

    def __call__(self, session, inputs, data_samples):
        from mmengine.structures import InstanceData
        names = [output.name for output in session.get_outputs()]
        takes_img_shape = IMG_SHAPE_NAME in {
            value.name
            for value in session.get_inputs() +
            session.get_overridable_initializers()
        }
        for i, sample in enumerate(data_samples):
            height, width = sample.img_shape
            feed = {INPUT_NAME: inputs[i:i + 1]}
            if takes_img_shape:
                feed[IMG_SHAPE_NAME] = np.array([height, width], np.int64)
            else:
                feed[INPUT_NAME] = np.ascontiguousarray(
                    inputs[i:i + 1, :, :height, :width])
            check_graph_input(session, feed[INPUT_NAME].shape)
            outputs = dict(zip(names, session.run(None, feed)))
            sample.pred_instances = InstanceData(
                **self.rescaled(outputs, sample))
        return data_samples

    def rescaled(self, outputs, sample):
        """``bboxes``, ``scores``, ``labels`` (``masks``) of one image in its
        original size, from the graph's outputs by name."""
        boxes = torch.from_numpy(outputs['boxes'])
        detections = dict(
            scores=torch.from_numpy(outputs['scores']),
            labels=torch.from_numpy(outputs['labels']))
        if 'roi_masks' not in outputs and 'masks' not in outputs:
            # mmdet's heads multiply by the reciprocal (scale_boxes).
            detections['bboxes'] = boxes * boxes.new_tensor(
                [1 / s for s in sample.scale_factor]).repeat(2)
            return detections
        # mmdet's mask head divides the boxes, then pastes at ori_shape.
        detections['bboxes'] = boxes / boxes.new_tensor(
            sample.scale_factor).repeat(2)
        ori_shape = tuple(sample.ori_shape[:2])
        if 'roi_masks' in outputs:
            from .masks import paste_masks
            detections['masks'] = paste_masks(
                torch.from_numpy(outputs['roi_masks']), detections['bboxes'],
                ori_shape, self.mask_threshold)
            return detections
        img_shape = tuple(sample.img_shape[:2])
        if img_shape != ori_shape:
            raise ValueError(
                f'The graph pastes its masks at the input size {img_shape}, '
                f'and the test pipeline resized the image from {ori_shape}: '
                'evaluating them needs a graph '
                "of the masks per RoI ('roi_masks', export_onnx's default).")
        detections['masks'] = torch.from_numpy(outputs['masks']).bool()
        return detections


def format_metrics(metrics, seconds, by_epoch=True, num_digits=4):
    """The line mmengine's ``LogProcessor`` logs after a test epoch.

    Examples:
        >>> format_metrics({'accuracy/top1': 87.5},
        ...                dict(batches=2, data_time=0.01, time=0.02))
        'Epoch(test) [2/2]    accuracy/top1: 87.5000  data_time: 0.0100  \
time: 0.0200'
    """
    batches = seconds['batches']
    items = []
    for name, value in {**metrics, 'data_time': seconds['data_time'],
                        'time': seconds['time']}.items():
        if isinstance(value, (np.generic, np.ndarray, torch.Tensor)) and (
                np.size(value) == 1):
            value = value.item()  # a scalar, as mmengine's MessageHub
        if isinstance(value, float):
            value = f'{value:.{num_digits}f}'
        elif isinstance(value, (torch.Tensor, np.ndarray)):
            value = f'\n{value}\n'
        items.append(f'{name}: {value}')
    mode = 'Epoch' if by_epoch else 'Iter'
    return f'{mode}(test) [{batches}/{batches}]    ' + '  '.join(items)
