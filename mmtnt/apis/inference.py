"""The OpenMMLab Inferencer of a config's task (mmpretrain's, mmdet's or
mmseg's, by ``default_scope``), grayscale input for classifiers of one
channel, and a plain summary of what it predicts."""
import numpy as np
import torch
from mmcv.image import imread
from mmengine.config import Config
from mmengine.dataset import Compose, default_collate
from mmengine.model import BaseModel
from mmpretrain.apis import ImageClassificationInferencer

from mmtnt.accel import accelerate_for_cpu
from mmtnt.accel.api import model_device

TASKS = ('mmpretrain', 'mmdet', 'mmseg')


class ClassificationInferencer(ImageClassificationInferencer):
    """mmpretrain's classification Inferencer, reading images in grayscale
    for a model whose data preprocessor normalises one channel.

    Args:
        model (str | Config): A config file or a loaded config.
        pretrained (str | bool): The checkpoint, or False for the
            initialised weights.
        device (str, optional): ``'cpu'``, ``'cuda'``... Defaults to the
            first GPU when there is one, else the CPU.

    Examples:
        >>> from mmtnt.apis import ClassificationInferencer
        >>> inferencer = ClassificationInferencer(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py',
        ...     'work_dirs/demo/epoch_4.pth', device='cpu')
        >>> inferencer('shirt.png')[0]['pred_class']
        'Shirt'
    """

    @property
    def in_channels(self):
        """int: The number of image channels the model normalises."""
        return self.model.data_preprocessor.mean.shape[0]

    def preprocess(self, inputs, batch_size=1):
        """Load, transform and batch the inputs (paths or arrays).

        Args:
            inputs (list[str | np.ndarray]): Image files or HxW(xC) arrays.
            batch_size (int): Images per batch. Defaults to 1.

        Yields:
            dict: A collated batch for ``model.test_step``.
        """
        flag = 'grayscale' if self.in_channels == 1 else 'color'

        def load_image(input_):
            img = imread(input_, flag=flag)
            if img is None:
                raise ValueError(f'Failed to read image {input_}.')
            return dict(
                img=img, img_shape=img.shape[:2], ori_shape=img.shape[:2])

        pipeline = Compose([load_image, self.pipeline])
        chunks = self._get_chunk_data(map(pipeline, inputs), batch_size)
        yield from map(default_collate, chunks)


def build_inferencer(config, checkpoint=None, device=None, cpu_accel=True):
    """Build the Inferencer of the config's task.

    Args:
        config (str | Config | BaseModel): A config whose
            ``default_scope`` is ``mmpretrain``, ``mmdet`` or ``mmseg``, or
            a model built from one (by :func:`mmtnt.apis.get_model`), used
            as it is.
        checkpoint (str, optional): Weights to load into the model of a
            config; None keeps the initialised weights.
        device (str, optional): Where to run. Defaults to a built model's
            device, else the first GPU when there is one, else the CPU.
        cpu_accel (bool): Apply :func:`mmtnt.accelerate_for_cpu` to a model
            on the CPU. Defaults to True.

    Returns:
        BaseInferencer: :class:`ClassificationInferencer`, mmdet's
        ``DetInferencer`` or mmseg's ``MMSegInferencer``.

    Examples:
        >>> from mmtnt.apis import build_inferencer
        >>> inferencer = build_inferencer(
        ...     'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py',
        ...     'iter_2000.pth', device='cpu')
        >>> type(inferencer).__name__
        'MMSegInferencer'
    """
    built = config if isinstance(config, BaseModel) else None
    if built is not None:
        if checkpoint is not None:
            raise ValueError('A built model keeps its weights: give '
                             'get_model() the checkpoint instead.')
        config = built.cfg
    cfg = config if isinstance(config, Config) else Config.fromfile(config)
    if device is None and built is not None:
        device = str(model_device(built))
    elif device is None:
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
    task = cfg.get('default_scope')
    if task == 'mmpretrain':
        inferencer = ClassificationInferencer(
            built or cfg, pretrained=checkpoint or False, device=device)
    elif task in ('mmdet', 'mmseg'):
        inferencer_class = _dense_inferencer_class(task, built)
        inferencer = inferencer_class(cfg, weights=checkpoint, device=device)
    else:
        raise ValueError(f'default_scope must be one of {TASKS} to choose '
                         f'an Inferencer, got {task!r}.')
    if cpu_accel:
        accelerate_for_cpu(inferencer.model)
    return inferencer


def _dense_inferencer_class(task, built=None):
    """mmdet's ``DetInferencer`` or mmseg's ``MMSegInferencer``; for a
    built model, a subclass that takes it in place of building one from
    the config."""
    if task == 'mmdet':
        from mmdet.apis import DetInferencer as inferencer_class
    else:
        from mmseg.apis import MMSegInferencer as inferencer_class
    if built is None:
        return inferencer_class

    class BuiltModelInferencer(inferencer_class):

        def _init_model(self, cfg, weights, device='cpu'):
            return built.to(device).eval()

    return BuiltModelInferencer


def summarize_prediction(task, prediction, classes, topk=5, score_thr=0.3):
    """Turn one image's prediction into plain numbers and text.

    Args:
        task (str): ``'mmpretrain'``, ``'mmdet'`` or ``'mmseg'``.
        prediction: What the task's Inferencer returns for the image with
            ``return_datasamples=True``: a ``DataSample``, ``DetDataSample``
            or ``SegDataSample``.
        classes (Sequence[str] | None): Class names, indexed by label.
        topk (int): Classes kept for a classifier. Defaults to 5.
        score_thr (float): Lowest score of a kept detection. Defaults to 0.3.

    Returns:
        dict: ``topk`` (label, class, score) for classification;
        ``instances`` (label, class, score, box ``[x1, y1, x2, y2]`` in
        pixels of the input, and ``mask_area`` for instance masks) for
        detection; ``classes`` (label, class, fraction of the pixels) and
        ``label_map`` (an HxW ``np.ndarray``) for segmentation.
    """

    def name(label):
        return classes[label] if classes is not None else str(label)

    if task == 'mmpretrain':
        scores = prediction.pred_score.float().cpu()
        values, labels = scores.topk(min(topk, scores.numel()))
        return dict(topk=[
            dict(label=int(label), cls=name(int(label)), score=float(value))
            for value, label in zip(values, labels)
        ])
    if task == 'mmdet':
        pred = prediction.pred_instances.cpu()
        keep = pred.scores >= score_thr
        instances = []
        for i in torch.nonzero(keep).flatten().tolist():
            label = int(pred.labels[i])
            instance = dict(
                label=label,
                cls=name(label),
                score=float(pred.scores[i]),
                box=[round(float(v), 1) for v in pred.bboxes[i]])
            if 'masks' in pred:
                instance['mask_area'] = int(pred.masks[i].sum())
            instances.append(instance)
        return dict(instances=instances)
    if task == 'mmseg':
        label_map = prediction.pred_sem_seg.data[0].cpu().numpy()
        labels, counts = np.unique(label_map, return_counts=True)
        order = np.argsort(-counts)
        return dict(
            classes=[
                dict(
                    label=int(labels[i]),
                    cls=name(int(labels[i])),
                    fraction=float(counts[i] / label_map.size))
                for i in order
            ],
            label_map=label_map)
    raise ValueError(f'task must be one of {TASKS}, got {task!r}.')
