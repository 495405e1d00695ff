"""Every config under configs/ builds its model and runs one inference.

Each config is read with ``Config.fromfile``, its model built through the
registry of its ``default_scope`` (mmpretrain, mmdet or mmseg), and one
image goes through ``model.test_step``: the data preprocessor (normalising,
padding), the backbone, the neck and the heads with their post-processing,
as in ``tools/test.py``. The image is small and its sides are not multiples
of 16 or 32 (60x76), so that the padding each config relies on is
exercised (TNT needs multiples of its patch size; mmdet pads to 32, the
TNT segmentors pad test images with ``test_cfg=dict(size_divisor=32)``).
Classifiers get a 64x64 image: their test pipelines crop squares of a fixed
size. No data set and no checkpoint is needed.
"""
import copy
import glob
import os
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import MODELS, init_default_scope

CONFIG_ROOT = osp.join(
    osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'configs')
IMAGE_HW = (60, 76)
CLS_IMAGE_HW = (64, 64)


def discover_configs():
    """Every config under configs/, relative to it, but the bases."""
    paths = glob.glob(osp.join(CONFIG_ROOT, '**', '*.py'), recursive=True)
    rel = (osp.relpath(p, CONFIG_ROOT) for p in paths)
    return sorted(p for p in rel if '_base_' not in p.split(os.sep))


def build_model(cfg):
    """The model as the runner builds it, on the CPU, in eval mode."""
    init_default_scope(cfg.get('default_scope', 'mmengine'))
    model_cfg = copy.deepcopy(cfg.model)
    # mmpretrain configs keep the data preprocessor at the top level; the
    # runner moves it into the model.
    if 'data_preprocessor' in cfg and 'data_preprocessor' not in model_cfg:
        model_cfg.data_preprocessor = copy.deepcopy(cfg.data_preprocessor)
    # Mask R-CNN's default score threshold (0.05) lets no box of a random
    # model through; keep a few so that the mask head runs too. Fewer
    # proposals (1000 by default) keep the test quick.
    test_cfg = model_cfg.get('test_cfg') or {}
    if test_cfg.get('rcnn') is not None:
        test_cfg.rcnn.update(score_thr=0.0, max_per_img=5)
    if test_cfg.get('rpn') is not None:
        test_cfg.rpn.update(nms_pre=200, max_per_img=50)
    model = MODELS.build(model_cfg)
    # SyncBN needs a process group in training only, but revert it as the
    # runner does outside distributed runs.
    return revert_sync_batchnorm(model).eval()


def image(channels, hw=IMAGE_HW):
    return torch.randint(0, 256, (channels, *hw), dtype=torch.uint8)


def det_sample():
    from mmdet.structures import DetDataSample
    return DetDataSample(
        metainfo=dict(
            img_id=0,
            img_path='',
            ori_shape=IMAGE_HW,
            img_shape=IMAGE_HW,
            scale_factor=(1.0, 1.0)))


def seg_sample():
    from mmseg.structures import SegDataSample
    return SegDataSample(
        metainfo=dict(img_path='', ori_shape=IMAGE_HW, img_shape=IMAGE_HW))


@pytest.mark.parametrize('rel_path', discover_configs())
def test_config_builds_and_infers(rel_path):
    cfg = Config.fromfile(
        osp.join(CONFIG_ROOT, rel_path), format_python_code=False)
    with torch.no_grad():
        check_inference(rel_path, cfg)


def check_inference(rel_path, cfg):
    scope = cfg.get('default_scope')
    model = build_model(cfg)
    mean = getattr(model.data_preprocessor, 'mean', None)
    channels = mean.numel() if mean is not None else 3

    if scope == 'mmpretrain':
        results = model.test_step(
            dict(inputs=[image(channels, CLS_IMAGE_HW)]))
        assert len(results) == 1
        num_classes = cfg.model.head.num_classes
        assert results[0].pred_score.shape == (num_classes, )
        assert torch.isfinite(results[0].pred_score).all()
    elif scope == 'mmdet':
        results = model.test_step(
            dict(inputs=[image(channels)], data_samples=[det_sample()]))
        assert len(results) == 1
        instances = results[0].pred_instances
        assert instances.bboxes.dim() == 2 and instances.bboxes.shape[1] == 4
        assert torch.isfinite(instances.bboxes).all()
        if 'mask_head' in cfg.model.get('roi_head', {}):
            # the mask head ran on the kept boxes
            assert len(instances) > 0
            assert tuple(instances.masks.shape[1:]) == IMAGE_HW
    elif scope == 'mmseg':
        results = model.test_step(
            dict(inputs=[image(channels)], data_samples=[seg_sample()]))
        assert len(results) == 1
        num_classes = cfg.model.decode_head.num_classes
        logits = results[0].seg_logits.data
        assert tuple(logits.shape) == (num_classes, *IMAGE_HW)
        assert torch.isfinite(logits).all()
        assert tuple(results[0].pred_sem_seg.data.shape[-2:]) == IMAGE_HW
    else:
        pytest.fail(f'{rel_path}: default_scope {scope!r} is not one of '
                    'mmpretrain, mmdet, mmseg')


def test_tnt_segmentor_needs_no_test_time_padding():
    """TNT pads its input to the patch size itself: without the config's
    test-time padding the segmentor still infers on the 60x76 image (not a
    multiple of 16), with logits of its size."""
    assert IMAGE_HW[0] % 16 and IMAGE_HW[1] % 16
    rel_path = osp.join('tnt', 'upernet_tnt-s-p16_8xb2-160k_ade20k-512x512.py')
    cfg = Config.fromfile(
        osp.join(CONFIG_ROOT, rel_path), format_python_code=False)
    cfg.model.data_preprocessor.pop('test_cfg')
    with torch.no_grad():
        check_inference(rel_path, cfg)


def training_batch(scope, hw=(64, 64)):
    """Two images with one object each / random label maps."""
    h, w = hw
    inputs, samples = [], []
    for _ in range(2):
        inputs.append(image(3, hw))
        if scope == 'mmdet':
            from mmdet.structures.mask import BitmapMasks
            from mmengine.structures import InstanceData
            sample = det_sample()
            sample.set_metainfo(dict(ori_shape=hw, img_shape=hw))
            mask = torch.zeros(1, h, w, dtype=torch.uint8)
            mask[:, 20:50, 10:40] = 1
            sample.gt_instances = InstanceData(
                bboxes=torch.tensor([[10., 20., 40., 50.]]),
                labels=torch.tensor([3]),
                masks=BitmapMasks(mask.numpy(), h, w))
        else:
            from mmengine.structures import PixelData
            sample = seg_sample()
            sample.set_metainfo(dict(ori_shape=hw, img_shape=hw))
            sample.gt_sem_seg = PixelData(
                data=torch.randint(0, 150, (1, h, w)))
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


# The dense configs that return only some of a backbone's or a pyramid's
# maps, or add modules around them (TNT's FeaturePyramid, PyramidTNT's
# upsampling, RetinaNet's FPN starting at stride 8), one per family and
# task (the S variants, which the other sizes inherit from). The other
# Twins configs feed every stage map to the standard heads.
TRAIN_CHECK_CONFIGS = [
    p for p in discover_configs()
    if p.split(os.sep)[0] in ('tnt', 'pyramid_tnt') and any(
        f'_{bb}_' in osp.basename(p) for bb in ('tnt-s-p16', 'pyramid-tnt-s'))
] + [
    osp.join('twins', 'retinanet_twins-pcpvt-s_fpn_1x_coco.py'),
    osp.join('twins', 'retinanet_twins-svt-s_fpn_1x_coco.py'),
]


@pytest.mark.parametrize('rel_path', TRAIN_CHECK_CONFIGS)
def test_training_step_reaches_every_parameter(rel_path):
    """One loss and backward pass in training mode: every parameter gets a
    gradient (distributed training stops on unused parameters), and the
    losses are finite."""
    cfg = Config.fromfile(
        osp.join(CONFIG_ROOT, rel_path), format_python_code=False)
    if cfg.default_scope == 'mmseg':
        # no padding of the small images to the 512x512 crop size (slow)
        cfg.model.data_preprocessor.update(size=None, size_divisor=32)
    model = build_model(cfg).train()
    data = model.data_preprocessor(training_batch(cfg.default_scope), True)
    losses = model(**data, mode='loss')
    loss, _ = model.parse_losses(losses)
    assert torch.isfinite(loss)
    loss.backward()
    unused = [
        name for name, param in model.named_parameters()
        if param.requires_grad and param.grad is None
    ]
    assert unused == []
