"""Detectors and segmentors built from their configs, trained on random
batches at their training sizes, and the schedules of their configs: what
``python -m benchmarks.dense_benchmark`` measures.

A config is an mmdet detector or an mmseg segmentor (its
``default_scope``), a file or ``package::path`` of an installed OpenMMLab
package's config (mmengine's ``get_config``). Every config is built under
its own scope (none is left behind), so detectors and segmentors run in
one process; the backbone's ``Pretrained`` initialization is dropped (no
weights are loaded: the timings do not depend on them).

Each model trains on one random batch of the config's training size
(:func:`train_input_size`), with synthetic but valid targets:

- detection: the largest ``scale`` of the train pipeline's resizes, as
  short x long side (1333x800 -> an 800x1333 image, which the data
  preprocessor pads to 800x1344), and per image ``NUM_BOXES`` random
  boxes with labels, and for detectors with a mask head, masks filling
  the boxes (``BitmapMasks``);
- segmentation: the data preprocessor's ``size`` (the crop, 512x512 for
  ADE20K), and a random ``gt_sem_seg`` of the model's classes with
  ``IGNORED_FRACTION`` of the pixels set to ``IGNORE_INDEX`` (none where
  a loss weighs the classes: mmseg's ``CrossEntropyLoss`` fails on ignored
  pixels then).

A train step (:meth:`DenseRun.step`) is ``model.train_step`` with the
optimizer wrapper built from the config (``build_optim_wrapper``): the
data preprocessor, the forward in ``'loss'`` mode, the parsed losses'
backward and the optimizer step, as mmengine's train loops run it.

:class:`Schedule` turns a train step into the GPU-hours of the config's
schedule: its iterations (mmseg: ``train_cfg.max_iters``; mmdet:
``train_cfg.max_epochs`` x ceil(training images / total batch), COCO
train2017 has 118287 images) x the train step x the GPUs / 3600, the GPUs
and per-GPU batch being those of the config name (``8xb2``: 8 GPUs x 2
images), else ``auto_scale_lr.base_batch_size`` /
``train_dataloader.batch_size`` (the ``_1x_coco`` configs: 16 / 2 = 8
GPUs). A step measured at another batch is scaled to the config's per-GPU
batch. It is a lower bound: data loading, communication between GPUs,
validation and checkpoints are not counted.
"""
import copy
import inspect
import math
import os.path as osp
import re

import numpy as np
import torch
from mmengine.model import revert_sync_batchnorm
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODELS, DefaultScope

from mmtnt.accel import accelerate_for_cpu
from mmtnt.analysis import load_config

TASK_NAMES = dict(mmdet='detector', mmseg='segmentor')
# Training images of the datasets that epoch-based schedules go through,
# by their annotation file.
TRAIN_IMAGES = {'instances_train2017.json': 118287}
NUM_BOXES = 8
IGNORE_INDEX = 255
IGNORED_FRACTION = 0.1


def load_dense_config(name, cfg_options=None):
    """Read a detector's or segmentor's config
    (:func:`mmtnt.analysis.load_config` for the scopes of
    :data:`TASK_NAMES`).

    Args:
        name (str): A config file, or ``package::path`` of an installed
            OpenMMLab package's config.
        cfg_options (dict, optional): Settings merged into it.

    Returns:
        Config: The config.

    Examples:
        >>> cfg = load_dense_config(
        ...     'mmseg::twins/twins_svt-s_uperhead_8xb2-160k_'
        ...     'ade20k-512x512.py')
        >>> cfg.model.backbone.type
        'SVT'
    """
    return load_config(name, cfg_options, scopes=tuple(TASK_NAMES))


def config_label(name):
    """The short name of a config in the table: its file name without
    ``.py``, after the package of ``package::path``.

    Examples:
        >>> config_label('mmseg::twins/twins_svt-s_uperhead_8xb2-160k_'
        ...              'ade20k-512x512.py')
        'mmseg::twins_svt-s_uperhead_8xb2-160k_ade20k-512x512'
    """
    stem = osp.splitext(osp.basename(name))[0]
    return f'{name.split("::")[0]}::{stem}' if '::' in name else stem


def _train_dataset(cfg):
    """The innermost train dataset config, and how often the wrappers
    around it repeat it (``RepeatDataset.times``)."""
    dataset, times = cfg.train_dataloader.dataset, 1
    while 'dataset' in dataset:
        times *= dataset.get('times', 1)
        dataset = dataset.dataset
    return dataset, times


def _transforms(pipeline):
    """Every transform of a pipeline, those nested in others (the lists
    of ``RandomChoice``, ``RandomApply``) included."""
    for transform in pipeline:
        if isinstance(transform, (list, tuple)):
            yield from _transforms(transform)
        else:
            yield transform
            yield from _transforms(transform.get('transforms', []))


def train_input_size(cfg):
    """The (H, W) of the config's training images.

    Args:
        cfg (Config): A detector's or segmentor's config.

    Returns:
        tuple[int, int]: Detection: the largest resize ``scale`` (or
        ``scales``) of the train pipeline, short x long side (a landscape
        image filling it). Segmentation: the data preprocessor's ``size``,
        else the pipeline's ``crop_size``.

    Examples:
        >>> train_input_size(load_dense_config(
        ...     'configs/twins/mask-rcnn_twins-svt-s_fpn_1x_coco.py'))
        (800, 1333)
    """
    transforms = list(_transforms(_train_dataset(cfg)[0].get('pipeline', [])))
    if cfg.default_scope == 'mmseg':
        sizes = [cfg.model.get('data_preprocessor', {}).get('size')]
        sizes += [t['crop_size'] for t in transforms if 'crop_size' in t]
        sizes = [tuple(size) for size in sizes if size]
        if sizes:
            return sizes[0]
    else:
        scales = [t['scale'] for t in transforms if 'scale' in t]
        scales += [s for t in transforms for s in t.get('scales', [])]
        scales = [(s, s) if isinstance(s, int) else tuple(s) for s in scales]
        if scales:
            largest = max(scales, key=math.prod)
            return min(largest), max(largest)
    raise SystemExit('no training size in the config\'s train pipeline: '
                     'give --img-size.')


class Schedule:
    """A config's training schedule, in train steps on its GPUs.

    Args:
        cfg (Config): A detector's or segmentor's config.
        name (str): Its file name (``NxbM`` in it: N GPUs of M images).
        train_images (int, optional): Images of the training set; by
            default those of :data:`TRAIN_IMAGES`, by the annotation file.

    Attributes:
        per_gpu_batch (int): ``train_dataloader.batch_size``.
        gpus (int | None): From the name, else from
            ``auto_scale_lr.base_batch_size``; None if neither says.
        iterations (int | None): ``train_cfg.max_iters``, or
            ``max_epochs`` x the iterations of an epoch; None for epochs of
            an unknown training set.
        text (str): The schedule in words, or why it is unknown.

    Examples:
        >>> schedule = Schedule(load_dense_config(
        ...     'configs/twins/mask-rcnn_twins-svt-s_fpn_1x_coco.py'),
        ...     'mask-rcnn_twins-svt-s_fpn_1x_coco.py')
        >>> schedule.iterations, schedule.gpus, schedule.text
        (88716, 8, '12 ep x 7393 it, 8 GPUs x 2')
    """

    def __init__(self, cfg, name, train_images=None):
        self.per_gpu_batch = cfg.train_dataloader.batch_size
        self.gpus = self._gpus(cfg, osp.basename(name))
        loop = cfg.get('train_cfg', {})
        plural = 's' if self.gpus != 1 else ''
        gpus = (f'{self.gpus} GPU{plural} x {self.per_gpu_batch}'
                if self.gpus else 'GPUs unknown')
        self.iterations = loop.get('max_iters')
        if self.iterations is not None:
            self.text = f'{self.iterations} it, {gpus}'
            return
        epochs = loop.get('max_epochs')
        dataset, times = _train_dataset(cfg)
        if train_images is None:
            train_images = TRAIN_IMAGES.get(
                osp.basename(dataset.get('ann_file', '')))
        if epochs is None or train_images is None or not self.gpus:
            self.text = (f'{epochs} ep of unknown images (--train-images), '
                         f'{gpus}')
            return
        per_epoch = math.ceil(train_images * times /
                              (self.gpus * self.per_gpu_batch))
        self.iterations = epochs * per_epoch
        self.text = f'{epochs} ep x {per_epoch} it, {gpus}'

    def _gpus(self, cfg, file_name):
        match = re.search(r'(\d+)xb(\d+)', file_name)
        if match:
            return int(match[1])
        base = cfg.get('auto_scale_lr', {}).get('base_batch_size')
        return base // self.per_gpu_batch if base else None

    def gpu_hours(self, step_seconds, batch_size):
        """The GPU-hours of the schedule at ``step_seconds`` per train step
        of ``batch_size`` images (scaled to the per-GPU batch).

        Args:
            step_seconds (float): Seconds of one train step.
            batch_size (int): Its images.

        Returns:
            float | None: Iterations x per-GPU step x GPUs / 3600; None
            where the iterations or GPUs are unknown.

        Examples:
            >>> schedule.gpu_hours(0.5, 2)  # 88716 it x 0.5 s x 8 GPUs
            98.57333333333334
        """
        if self.iterations is None or not self.gpus:
            return None
        per_gpu_step = step_seconds * self.per_gpu_batch / batch_size
        return self.iterations * per_gpu_step * self.gpus / 3600


def backbone_takes_with_cp(cfg):
    """Whether the config's backbone class has a ``with_cp`` argument.

    Args:
        cfg (Config): A detector's or segmentor's config.

    Returns:
        bool: Looked up in the registry of the config's scope.

    Examples:
        >>> backbone_takes_with_cp(load_dense_config(
        ...     'mmseg::twins/twins_svt-s_uperhead_8xb2-160k_'
        ...     'ade20k-512x512.py'))
        False
    """
    with MODELS.switch_scope_and_registry(cfg.default_scope) as registry:
        backbone = registry.get(cfg.model.backbone.type)
    return 'with_cp' in inspect.signature(backbone).parameters


def backbone_label(cfg):
    """The backbone's type with its package: ``mmtnt.SVT``, ``mmseg.SVT``."""
    kind = cfg.model.backbone.type
    return kind if '.' in kind else f'{cfg.default_scope}.{kind}'


def drop_pretrained(model_cfg):
    """Load no weights: drop the backbone's ``Pretrained`` ``init_cfg``
    and the ``pretrained`` of the model and backbone (older mmseg configs).

    Args:
        model_cfg (ConfigDict): ``cfg.model``; changed in place.

    Examples:
        >>> cfg = load_dense_config('mmseg::twins/twins_svt-s_uperhead_'
        ...                         '8xb2-160k_ade20k-512x512.py')
        >>> drop_pretrained(cfg.model)
        >>> cfg.model.backbone.init_cfg is None
        True
    """
    backbone = model_cfg.backbone
    if (backbone.get('init_cfg') or {}).get('type') == 'Pretrained':
        backbone.init_cfg = None
    model_cfg.pop('pretrained', None)
    backbone.pop('pretrained', None)


def random_boxes(count, height, width, generator):
    """``count`` boxes (x1, y1, x2, y2) inside a ``height`` x ``width``
    image, each side 1/16 to 1/2 of the image's, on whole pixels.

    Examples:
        >>> random_boxes(8, 800, 1333, torch.Generator()).shape
        torch.Size([8, 4])
    """
    sizes = torch.rand(count, 2, generator=generator) * 7 / 16 + 1 / 16
    sizes *= torch.tensor([width, height])
    corners = torch.rand(count, 2, generator=generator) * (
        torch.tensor([width, height]) - sizes)
    return torch.cat([corners, corners + sizes], dim=1).floor()


def detection_batch(img_size, batch_size, num_classes, with_mask,
                    generator):
    """A batch as mmdet's ``PackDetInputs`` and collate make it.

    Args:
        img_size (tuple[int, int]): Image (H, W).
        batch_size (int): Images.
        num_classes (int): Labels are drawn from ``range(num_classes)``.
        with_mask (bool): Add instance masks filling the boxes.
        generator (torch.Generator): The random source.

    Returns:
        dict: ``inputs`` (uint8 BGR images) and ``data_samples``
        (``DetDataSample`` with ``NUM_BOXES`` ``gt_instances``).

    Examples:
        >>> batch = detection_batch((64, 96), 2, 80, True,
        ...                         torch.Generator().manual_seed(0))
        >>> batch['data_samples'][0].gt_instances.masks.masks.shape
        (8, 64, 96)
    """
    from mmdet.structures import DetDataSample
    from mmdet.structures.bbox import HorizontalBoxes
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData
    height, width = img_size
    inputs, samples = [], []
    for _ in range(batch_size):
        inputs.append(
            torch.randint(0, 256, (3, height, width), dtype=torch.uint8,
                          generator=generator))
        boxes = random_boxes(NUM_BOXES, height, width, generator)
        instances = InstanceData(
            bboxes=HorizontalBoxes(boxes),
            labels=torch.randint(0, num_classes, (NUM_BOXES, ),
                                 generator=generator))
        if with_mask:
            masks = np.zeros((NUM_BOXES, height, width), dtype=np.uint8)
            for mask, (x1, y1, x2, y2) in zip(masks, boxes.int().tolist()):
                mask[y1:y2, x1:x2] = 1
            instances.masks = BitmapMasks(masks, height, width)
        sample = DetDataSample(
            metainfo=dict(
                img_shape=img_size,
                ori_shape=img_size,
                scale_factor=(1.0, 1.0),
                flip=False,
                flip_direction=None))
        sample.gt_instances = instances
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


def segmentation_batch(img_size, batch_size, num_classes, generator,
                       ignored_fraction=IGNORED_FRACTION):
    """A batch as mmseg's ``PackSegInputs`` and collate make it.

    Args:
        img_size (tuple[int, int]): Image (H, W).
        batch_size (int): Images.
        num_classes (int): Labels are drawn from ``range(num_classes)``.
        generator (torch.Generator): The random source.
        ignored_fraction (float): The fraction of the pixels labelled
            ``IGNORE_INDEX``. Defaults to ``IGNORED_FRACTION``.

    Returns:
        dict: ``inputs`` (uint8 BGR images) and ``data_samples``
        (``SegDataSample`` with ``gt_sem_seg``).

    Examples:
        >>> batch = segmentation_batch((64, 64), 2, 150,
        ...                            torch.Generator().manual_seed(0))
        >>> batch['data_samples'][0].gt_sem_seg.data.shape
        torch.Size([1, 64, 64])
    """
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    inputs, samples = [], []
    for _ in range(batch_size):
        inputs.append(
            torch.randint(0, 256, (3, *img_size), dtype=torch.uint8,
                          generator=generator))
        labels = torch.randint(0, num_classes, (1, *img_size),
                               generator=generator)
        ignored = torch.rand(labels.shape, generator=generator)
        labels[ignored < ignored_fraction] = IGNORE_INDEX
        sample = SegDataSample(
            metainfo=dict(img_shape=img_size, ori_shape=img_size))
        sample.gt_sem_seg = PixelData(data=labels)
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


def weighs_classes(model_cfg):
    """Whether a segmentor's heads weigh their classes (``class_weight``
    of a loss): mmseg's ``CrossEntropyLoss`` then indexes the weights by
    every label, ``IGNORE_INDEX`` too, and fails on ignored pixels.

    Args:
        model_cfg (ConfigDict): ``cfg.model`` of a segmentor.

    Returns:
        bool: Whether a loss of ``decode_head`` or ``auxiliary_head`` has
        a ``class_weight``.

    Examples:
        >>> weighs_classes(load_dense_config(
        ...     'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'
        ...     ).model)
        True
    """
    losses = []
    for key in ('decode_head', 'auxiliary_head'):
        heads = model_cfg.get(key) or []
        for head in heads if isinstance(heads, list) else [heads]:
            loss = head.get('loss_decode', [])
            losses += loss if isinstance(loss, list) else [loss]
    return any(loss.get('class_weight') for loss in losses)


class DenseRun:
    """A config's model, optimizer wrapper and batch, ready to train.

    Args:
        name (str): The config as given (file or ``package::path``).
        cfg (Config): Its config; it is copied, not changed.
        img_size (tuple[int, int]): Image (H, W).
        batch_size (int): Images per step.
        device (torch.device): Where it trains.
        with_cp (bool): Set ``with_cp=True`` in the backbone.
        cpu_accel (bool): On the CPU, apply ``mmtnt.accelerate_for_cpu``.
        seed (int): Seeds the weights and the batch.

    Examples:
        >>> name = ('configs/demo/'
        ...         'upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py')
        >>> run = DenseRun(name, load_dense_config(name), (64, 64), 2,
        ...                torch.device('cpu'))
        >>> run.step()['loss'].isfinite()
        tensor(True)
    """

    def __init__(self, name, cfg, img_size, batch_size, device,
                 with_cp=False, cpu_accel=True, seed=0):
        cfg = copy.deepcopy(cfg)
        self.scope = cfg.default_scope
        self.label = config_label(name)
        self.backbone = backbone_label(cfg)
        self.img_size = img_size
        self.batch_size = batch_size
        self.with_cp = with_cp
        drop_pretrained(cfg.model)
        if with_cp:
            cfg.model.backbone.with_cp = True
        if self.scope == 'mmseg':
            cfg.model.data_preprocessor.size = img_size
        torch.manual_seed(seed)
        with DefaultScope.overwrite_default_scope(self.scope):
            model = revert_sync_batchnorm(MODELS.build(cfg.model))
            model.init_weights()
            model.to(device).train()
            if device.type == 'cpu' and cpu_accel:
                accelerate_for_cpu(model)
            self.optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
        self.model = model
        generator = torch.Generator().manual_seed(seed)
        if self.scope == 'mmseg':
            ignored = 0 if weighs_classes(cfg.model) else IGNORED_FRACTION
            self.data = segmentation_batch(img_size, batch_size,
                                           model.decode_head.num_classes,
                                           generator, ignored)
        else:
            head = (model.roi_head.bbox_head
                    if hasattr(model, 'roi_head') else model.bbox_head)
            self.data = detection_batch(img_size, batch_size,
                                        head.num_classes, model.with_mask,
                                        generator)

    def step(self):
        """One train step (``model.train_step``).

        Returns:
            dict[str, Tensor]: The losses as logged (``loss``: their sum).
        """
        with DefaultScope.overwrite_default_scope(self.scope):
            return self.model.train_step(self.data, self.optim_wrapper)
