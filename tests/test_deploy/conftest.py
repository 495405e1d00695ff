"""The demo Mask R-CNN that the deploy tests export and compare with mmdet.

It is built once per test session with random weights. Its untrained box
head scores every class near 1/5, so the score threshold is set inside
that range (:data:`SCORE_THR`): some (box, class) pairs pass, others do
not, fewer than ``max_per_img`` are kept, and NMS still has to separate
classes and overlaps.
"""
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import MODELS, DefaultScope

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(REPO, 'configs', 'demo',
                  'mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py')
#: Between the random head's smallest and largest class scores (0.17-0.25),
#: passed by about a tenth of the (proposal, class) pairs.
SCORE_THR = 0.22


@pytest.fixture(scope='session')
def mask_rcnn():
    """The demo Mask R-CNN with random weights, in eval mode. It is built
    under mmdet's default scope, which is put back at once: running it
    needs none."""
    import mmtnt.models  # noqa: F401 (registers the backbones)
    cfg = Config.fromfile(CONFIG)
    cfg.model.test_cfg.rcnn.score_thr = SCORE_THR
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmdet'):
        return MODELS.build(cfg.model).eval()
