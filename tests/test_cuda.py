"""One mixed-precision train step of every family on a GPU, eager against
``torch.compile``: the plain model is what runs there.

Skipped where no CUDA device exists (every CPU-only machine, CI included).
Each family's backbone is the one of its RetinaNet config (S arch, four
feature maps), on a 2x3x224x288 batch.
"""
import copy
import os.path as osp

import pytest
import torch
import torch._dynamo
from mmengine.config import Config

from mmtnt.accel import is_accelerated
from mmtnt.registry import MODELS

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason='needs a CUDA device')

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
DENSE_CONFIGS = {
    'TNT': 'configs/tnt/retinanet_tnt-s-p16_fpn_1x_coco.py',
    'PyramidTNT': 'configs/pyramid_tnt/retinanet_pyramid-tnt-s_fpn_1x_coco.py',
    'PCPVT': 'configs/twins/retinanet_twins-pcpvt-s_fpn_1x_coco.py',
    'SVT': 'configs/twins/retinanet_twins-svt-s_fpn_1x_coco.py',
}
# float16 and bfloat16 keep 11 and 8 bits of mantissa; compiled kernels
# round at other places than eager ones.
TOLERANCE = {torch.float16: 2e-2, torch.bfloat16: 5e-2}


def backbone_of(config):
    cfg = Config.fromfile(osp.join(REPO, config))
    backbone = dict(cfg.model.backbone)
    backbone.pop('init_cfg', None)  # no checkpoint to load here
    return backbone


def train_step(model, images, dtype, compile=False):
    """One forward pass under autocast and one backward pass; returns the
    float32 gradients by name."""
    forward = torch.compile(model, fullgraph=True) if compile else model
    model.zero_grad(set_to_none=True)
    with torch.autocast('cuda', dtype=dtype):
        outs = forward(images)
    sum(out.float().square().mean() for out in outs).backward()
    return {name: p.grad for name, p in model.named_parameters()}


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
@pytest.mark.parametrize('family', list(DENSE_CONFIGS))
def test_amp_train_step_eager_and_compiled(family, dtype, fresh_dynamo):
    if dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        pytest.skip('this GPU has no bfloat16')
    torch.manual_seed(0)
    model = MODELS.build(backbone_of(DENSE_CONFIGS[family]))
    model.init_weights()
    model = model.cuda().train()
    assert not is_accelerated(model)
    compiled = copy.deepcopy(model)
    images = torch.randn(2, 3, 224, 288, device='cuda')

    grads = train_step(model, images, dtype)
    compiled_grads = train_step(compiled, images, dtype, compile=True)
    for name, grad in grads.items():
        assert grad is not None and torch.isfinite(grad).all(), name
        other = compiled_grads[name]
        assert other is not None, name
        scale = max(float(grad.abs().max()), 1e-6)
        error = float((other - grad).abs().max()) / scale
        assert error <= TOLERANCE[dtype], f'{name}: relative error {error:.1e}'
