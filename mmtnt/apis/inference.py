"""The OpenMMLab Inferencer of a config's task (by ``default_scope``), with
grayscale input for classifiers of one channel."""
import torch
from mmcv.image import imread
from mmengine.config import Config
from mmengine.dataset import Compose, default_collate
from mmengine.model import BaseModel
from mmpretrain.apis import ImageClassificationInferencer

from mmtnt.accel import accelerate_for_cpu
from mmtnt.accel.api import model_device
from .model import SCOPE_TASKS


class ClassificationInferencer(ImageClassificationInferencer):
    """mmpretrain's classification Inferencer, reading images in grayscale
    for a model whose data preprocessor normalises one channel.

    Args:
        model (str | Config): A config file or a loaded config.
        pretrained (str | bool): The checkpoint, or False for none.
        device (str, optional): Defaults to a GPU if any, else the CPU.

    Examples:
        >>> from mmtnt.apis import ClassificationInferencer
        >>> inferencer = ClassificationInferencer(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py',
        ...     'work_dirs/demo/epoch_4.pth', device='cpu')  # doctest: +SKIP
        >>> inferencer('shirt.png')[0]['pred_class']  # doctest: +SKIP
        'Shirt'
    """

    @property
    def in_channels(self):
        """int: The number of image channels the model normalises."""
        return self.model.data_preprocessor.mean.shape[0]

    def preprocess(self, inputs, batch_size=1):
        """Load, transform and batch the inputs (paths or arrays)."""
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
            a model built from one, used as it is.
        checkpoint (str, optional): Weights for a config's model.
        device (str, optional): Defaults to a built model's device, else a
            GPU if any, else the CPU.
        cpu_accel (bool): Apply :func:`mmtnt.accelerate_for_cpu` on the
            CPU. Defaults to True.

    Returns:
        BaseInferencer: :class:`ClassificationInferencer`, mmdet's
        ``DetInferencer`` or mmseg's ``MMSegInferencer``.

    Examples:
        >>> from mmtnt.apis import build_inferencer
        >>> inferencer = build_inferencer(
        ...     'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py',
        ...     device='cpu')
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
        raise ValueError(f'default_scope must be one of {tuple(SCOPE_TASKS)} '
                         f'to choose an Inferencer, got {task!r}.')
    if cpu_accel:
        accelerate_for_cpu(inferencer.model)
    return inferencer


def _dense_inferencer_class(task, built=None):
    """mmdet's or mmseg's Inferencer; for a built model, a subclass that
    uses it instead of building one."""
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
