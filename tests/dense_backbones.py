"""The backbones of the four families' RetinaNet configs (S archs, four
feature maps), as the GPU tests and the compile tests train them."""
import os.path as osp

import torch
from mmengine.config import Config

from mmtnt.registry import MODELS

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
DENSE_CONFIGS = {
    'TNT': 'configs/tnt/retinanet_tnt-s-p16_fpn_1x_coco.py',
    'PyramidTNT': 'configs/pyramid_tnt/retinanet_pyramid-tnt-s_fpn_1x_coco.py',
    'PCPVT': 'configs/twins/retinanet_twins-pcpvt-s_fpn_1x_coco.py',
    'SVT': 'configs/twins/retinanet_twins-svt-s_fpn_1x_coco.py',
}
STOCHASTIC_SETTINGS = ('drop_rate', 'attn_drop_rate', 'drop_path_rate')


def config_of(family):
    """The RetinaNet config of ``family``."""
    return Config.fromfile(osp.join(REPO, DENSE_CONFIGS[family]))


def deterministic_backbone(cfg):
    """The config's backbone, randomly initialised (seed 0), every
    stochastic layer off, in train mode on the CPU."""
    backbone = dict(cfg.model.backbone)
    backbone.pop('init_cfg', None)  # no checkpoint to load here
    backbone.update(dict.fromkeys(STOCHASTIC_SETTINGS, 0.))
    torch.manual_seed(0)
    model = MODELS.build(backbone)
    model.init_weights()
    return model.train()


def probe_loss(outs):
    """The outputs' dot products with fixed random maps: every parameter
    gets a gradient of its own size (a loss of the outputs' squares would
    not: after a norm it hardly depends on what comes before)."""
    generator = torch.Generator(device=outs[0].device).manual_seed(0)
    return sum((out.float() * torch.randn(
        out.shape, device=out.device, generator=generator)).mean()
               for out in outs)
