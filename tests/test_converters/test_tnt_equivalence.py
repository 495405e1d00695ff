"""The same random weights in timm's and mmpretrain's TNT, converted, give
the same outputs in mmtnt (fp32, eval)."""
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from equivalence import max_relative_error, official_tnt_layout, randomize_
from mmengine.runner import load_checkpoint

from mmtnt.converters import convert_tnt, detect_tnt_format
from mmtnt.models import TNT

timm = pytest.importorskip('timm')
REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-5

TIMM_VARIANTS = {
    'tnt_s_patch16_224': dict(arch='s', layout='official'),
    'tnt_b_patch16_224': dict(arch='b', layout='official'),
    'tnt_s_legacy_patch16_224': dict(arch='s', layout='legacy'),
}


class Classifier(nn.Module):
    """mmtnt TNT with a linear head, laid out like mmpretrain's
    ImageClassifier (``backbone.``, ``head.fc.``)."""

    def __init__(self, num_classes=1000, **backbone_cfg):
        super().__init__()
        self.backbone = TNT(**backbone_cfg)
        self.head = nn.Module()
        self.head.fc = nn.Linear(self.backbone.embed_dims, num_classes)

    def forward(self, x):
        return self.head.fc(self.backbone(x)[-1])


def load_converted(checkpoint, **backbone_cfg):
    model = Classifier(**backbone_cfg)
    model.load_state_dict(checkpoint['state_dict'], strict=True)
    return model.eval()


def timm_model(name, seed=0):
    return randomize_(timm.create_model(name, pretrained=False), seed).eval()


@pytest.mark.parametrize('name', list(TIMM_VARIANTS))
def test_timm_equivalence(name):
    reference = timm_model(name)
    checkpoint = convert_tnt(reference.state_dict())
    assert checkpoint['meta']['source_format'] == 'timm'
    assert checkpoint['meta']['layout'] == TIMM_VARIANTS[name]['layout']
    assert checkpoint['meta']['arch'] == TIMM_VARIANTS[name]['arch']
    model = load_converted(checkpoint, **TIMM_VARIANTS[name])
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        error = max_relative_error(model(x), reference(x))
    assert error < TOLERANCE, f'{name}: relative error {error:.2e}'


def test_official_layout_equivalence():
    from timm.models.tnt import checkpoint_filter_fn
    reference = timm_model('tnt_s_patch16_224', seed=3)
    official = official_tnt_layout(reference.state_dict())
    assert detect_tnt_format(official) == 'official'
    # The rewritten dict is a faithful official checkpoint: timm's own
    # filter maps it back onto timm's model exactly.
    restored = checkpoint_filter_fn(dict(official), reference)
    for key, value in reference.state_dict().items():
        torch.testing.assert_close(restored[key], value, rtol=0, atol=0)

    checkpoint = convert_tnt({'state_dict': official})
    assert checkpoint['meta']['source_format'] == 'official'
    model = load_converted(checkpoint, arch='s', layout='official')
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert max_relative_error(model(x), reference(x)) < TOLERANCE


def test_mmpretrain_equivalence():
    from mmpretrain.models import ImageClassifier
    reference = ImageClassifier(
        backbone=dict(type='TNT', arch='s'),
        neck=None,
        head=dict(
            type='LinearClsHead', num_classes=1000, in_channels=384,
            loss=dict(type='CrossEntropyLoss')))
    randomize_(reference, seed=5).eval()
    checkpoint = convert_tnt({'state_dict': reference.state_dict()})
    assert checkpoint['meta']['source_format'] == 'mmpretrain'
    assert checkpoint['meta']['layout'] == 'legacy'
    model = load_converted(checkpoint, arch='s', layout='legacy')
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        expected = reference(x, mode='tensor')
        error = max_relative_error(model(x), expected)
    assert error < TOLERANCE, f'relative error {error:.2e}'


def run_converter(*args):
    return subprocess.run(
        [sys.executable, 'tools/model_converters/tnt2mmtnt.py', *args],
        cwd=REPO, capture_output=True, text=True)


def test_converter_cli(tmp_path):
    reference = timm_model('tnt_s_legacy_patch16_224', seed=7)
    # Like the official releases: training arguments pickled beside weights.
    src = tmp_path / 'tnt_s_legacy.pth.tar'
    torch.save({'state_dict': reference.state_dict(),
                'args': Namespace(lr=1e-3)}, src)
    dst = tmp_path / 'converted.pth'

    refused = run_converter(str(src), str(dst))
    assert refused.returncode != 0
    assert '--allow-pickle' in refused.stderr
    assert not dst.exists()

    done = run_converter(str(src), str(dst), '--allow-pickle')
    assert done.returncode == 0, done.stderr
    assert "layout='legacy'" in done.stdout

    # The output loads safely (weights_only) and through mmengine.
    saved = torch.load(dst, weights_only=True)
    assert saved['meta']['layout'] == 'legacy'
    model = Classifier(arch='s', layout='legacy').eval()
    load_checkpoint(model, str(dst), strict=True)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert max_relative_error(model(x), reference(x)) < TOLERANCE


@pytest.mark.parametrize('name, config', [
    ('tnt_s_patch16_224', 'configs/tnt/tnt-s-p16_16xb64_in1k.py'),
    ('tnt_s_legacy_patch16_224',
     'configs/tnt/tnt-s-p16-legacy_16xb64_in1k.py'),
])
def test_ready_config_for_each_layout(name, config):
    """The classifier a config builds loads the converted weights of its
    layout strictly and gives timm's outputs."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(str(REPO / config))
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model).eval()
    reference = timm_model(name, seed=3)
    checkpoint = convert_tnt(reference.state_dict())
    model.load_state_dict(checkpoint['state_dict'], strict=True)
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        error = max_relative_error(model(x, mode='tensor'), reference(x))
    assert error < TOLERANCE, f'relative error {error:.2e}'
