"""The Twins ImageNet configs: one per variant, the official recipe, the
weight-decay exemptions of timm's optimizer factory, and an mmpretrain
classifier that builds."""
import re
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
# The ImageNet configs (the dense ones are checked in test_dense_configs).
CONFIGS = sorted((REPO / 'configs' / 'twins').glob('twins-*_in1k.py'))
DROP_PATH = {'s': 0.2, 'b': 0.3, 'l': 0.5}


class NamedLikeImageClassifier(torch.nn.Module):
    """Parameters named as in mmpretrain's ImageClassifier with a
    LinearClsHead (``backbone.``, ``head.fc.``)."""

    def __init__(self, backbone, in_channels):
        super().__init__()
        self.backbone = backbone
        self.head = torch.nn.Module()
        self.head.fc = torch.nn.Linear(in_channels, 1000)


def test_there_is_a_config_per_variant():
    names = {p.name for p in CONFIGS}
    for family in ('pcpvt', 'svt'):
        for size, setup in (('small', '8xb128'), ('base', '8xb128'),
                            ('large', '16xb64')):
            assert f'twins-{family}-{size}_{setup}_in1k.py' in names


@pytest.mark.parametrize('path', CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_recipe_and_weight_decay_keys(path):
    from mmengine.config import Config
    from mmengine.optim import build_optim_wrapper

    from mmtnt.registry import MODELS as MMTNT_MODELS
    cfg = Config.fromfile(str(path))
    family, size, gpus, batch = re.match(
        r'twins-(pcpvt|svt)-(small|base|large)_(\d+)xb(\d+)_in1k$',
        path.stem).groups()
    backbone_cfg = cfg.model.backbone
    assert backbone_cfg.type == f'mmtnt.{family.upper()}'
    assert backbone_cfg.arch == size[0]
    assert backbone_cfg.drop_path_rate == DROP_PATH[size[0]]
    assert cfg.train_dataloader.batch_size == int(batch)
    assert int(gpus) * int(batch) == cfg.auto_scale_lr.base_batch_size
    # lr 5e-4 per 512 images.
    assert cfg.optim_wrapper.optimizer.lr == pytest.approx(
        5e-4 * cfg.auto_scale_lr.base_batch_size / 512)
    assert cfg.optim_wrapper.clip_grad.max_norm == 5.0
    assert cfg.train_cfg.max_epochs == 300
    assert cfg.train_dataloader.dataset.data_root == 'data/imagenet'

    with torch.device('meta'):
        backbone = MMTNT_MODELS.build(backbone_cfg)
        model = NamedLikeImageClassifier(backbone, cfg.model.head.in_channels)
    assert backbone.embed_dims[-1] == cfg.model.head.in_channels
    names = [n for n, _ in model.named_parameters()]
    for key in cfg.optim_wrapper.paramwise_cfg.get('custom_keys', {}):
        assert any(key in n for n in names), f'{key!r} matches nothing'
    # No decay on biases, norms and position encodings, as timm's optimizer
    # factory with the official no_weight_decay() (pos_block.*).
    norm_params = {
        f'{m_name}.{p_name}'
        for m_name, m in model.named_modules()
        if isinstance(m, torch.nn.LayerNorm)
        for p_name, _ in m.named_parameters(recurse=False)
    }
    expected = {
        n for n in names
        if n.endswith('.bias') or n in norm_params or '.pos_conv.' in n
    }
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    by_id = {id(p): n for n, p in model.named_parameters()}
    no_decay = {
        by_id[id(p)]
        for group in wrapper.optimizer.param_groups for p in group['params']
        if group['weight_decay'] == 0
    }
    assert no_decay == expected
    assert any('.pos_conv.proj.weight' in n for n in no_decay)


def test_config_builds_an_mmpretrain_classifier():
    pytest.importorskip('mmpretrain')
    from mmengine.config import Config
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS
    cfg = Config.fromfile(
        str(REPO / 'configs/twins/twins-svt-small_8xb128_in1k.py'))
    classifier = PRETRAIN_MODELS.build(cfg.model).eval()
    with torch.no_grad():
        logits = classifier(torch.randn(1, 3, 64, 64), mode='tensor')
    assert logits.shape == (1, 1000)
    # The data pipelines name transforms that mmpretrain has.
    from mmengine.dataset import Compose
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        for loader in (cfg.train_dataloader, cfg.val_dataloader):
            Compose(loader.dataset.pipeline)
    assert not cfg.train_dataloader.sampler.type.startswith('RepeatAug')
