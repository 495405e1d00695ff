"""Official PyramidTNT weights, converted, give the official outputs in
mmtnt (fp32, eval).

The official code is not on the package index, so the reference is a golden
fixture, ``tests/data/pyramid_tnt_golden.pth``, made with the official
``tnt_pytorch/pyramid_tnt.py`` (huawei-noah/Efficient-AI-Backbones
@1a98c857) for a reduced random arch by
``tests/data/make_pyramid_tnt_golden.py`` (``tests/data/README.md`` says
how to regenerate or check it):

- ``official_state_dict``: the official model's weights (official keys,
  10-class head); ``configs``: its arch in the official ``configs`` form;
- ``aligned``: a 2x3x64x64 input (the size the weights were made for) with
  the official ``forward_features`` (mean-pooled, final-normed) and logits;
- ``odd``: a 2x3x56x88 input, whose sentence grids 7x11, 4x6, 2x3, 1x2 are
  odd (padded before aggregation) and not divisible by the spatial
  reduction, with the official outputs there. The official constructor
  cannot size ``outer_pos`` and ``relative_pos`` for such grids, so the
  fixture gives the official forward the ones it needs (``size_tied``).

Weights and inputs hold values of fp16 precision and are stored as fp16
(exact): cast them to fp32 before use.
"""
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from equivalence import max_relative_error
from mmengine.runner import load_checkpoint

from mmtnt.converters import convert_pyramid_tnt
from mmtnt.converters.pyramid_tnt import detect_pyramid_tnt_format
from mmtnt.models import PyramidTNT

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / 'tests' / 'data' / 'pyramid_tnt_golden.pth'
TOLERANCE = 1e-5


@pytest.fixture(scope='module')
def golden():
    return torch.load(FIXTURE, weights_only=True)


def as_fp32(state_dict):
    return {
        key: value.float() if value.is_floating_point() else value
        for key, value in state_dict.items()
    }


def arch_of(configs):
    return dict(
        depths=configs['depths'],
        outer_dims=configs['outer_dims'],
        inner_dims=configs['inner_dims'],
        num_heads_outer=configs['outer_heads'],
        num_heads_inner=configs['inner_heads'])


class Classifier(nn.Module):
    """mmtnt PyramidTNT with a linear head, laid out like mmpretrain's
    ImageClassifier (``backbone.``, ``head.fc.``)."""

    def __init__(self, num_classes, **backbone_cfg):
        super().__init__()
        self.backbone = PyramidTNT(**backbone_cfg)
        self.head = nn.Module()
        self.head.fc = nn.Linear(self.backbone.embed_dims, num_classes)

    def forward(self, x):
        features = self.backbone(x)[-1]
        return features, self.head.fc(features)


def check_outputs(model, case):
    with torch.no_grad():
        features, logits = model.eval()(case['input'].float())
    errors = (max_relative_error(features, case['features']),
              max_relative_error(logits, case['logits']))
    assert max(errors) < TOLERANCE, f'relative errors {errors}'


def test_fixture_is_small_and_official(golden):
    assert FIXTURE.stat().st_size < 400 * 1024
    official = golden['official_state_dict']
    assert detect_pyramid_tnt_format(official) == 'official'
    # Block 1 of the 7-block stage runs the inner branch too.
    assert 'stages.1.blocks.1.inner_attn.q.weight' in official
    assert 'stages.1.blocks.2.inner_attn.q.weight' not in official


def test_official_weights_at_their_size(golden):
    checkpoint = convert_pyramid_tnt(
        {'state_dict': as_fp32(golden['official_state_dict'])})
    meta = checkpoint['meta']
    assert meta['source_format'] == 'official'
    assert meta['img_size'] == golden['aligned']['img_size']
    model = Classifier(
        golden['num_classes'],
        arch=arch_of(golden['configs']),
        img_size=meta['img_size'])
    model.load_state_dict(checkpoint['state_dict'], strict=True)
    check_outputs(model, golden['aligned'])


def test_official_weights_on_odd_grids(golden):
    odd = golden['odd']
    official = as_fp32(golden['official_state_dict'])
    official.update(as_fp32(odd['size_tied']))
    checkpoint = convert_pyramid_tnt(official)
    model = Classifier(
        golden['num_classes'],
        arch=arch_of(golden['configs']),
        img_size=tuple(odd['img_size']),
        out_indices=(0, 1, 2, 3))
    model.load_state_dict(checkpoint['state_dict'], strict=True)
    grids = [tuple(g) for g in odd['grids']]
    assert [grid.hw for grid in model.backbone.stage_token_grids(
        *odd['img_size'])] == grids
    check_outputs(model, odd)


def test_converter_cli(golden, tmp_path):
    src = tmp_path / 'ptnt_reduced.pth.tar'
    torch.save({'model': as_fp32(golden['official_state_dict'])}, src)
    dst = tmp_path / 'converted.pth'
    done = subprocess.run(
        [
            sys.executable, 'tools/model_converters/pyramid_tnt2mmtnt.py',
            str(src),
            str(dst)
        ],
        cwd=REPO,
        capture_output=True,
        text=True)
    assert done.returncode == 0, done.stderr
    assert 'img_size=64' in done.stdout
    assert 'num_heads_inner' in done.stdout  # a custom arch: say what to add
    # The output loads safely (weights_only) and through mmengine.
    saved = torch.load(dst, weights_only=True)
    assert saved['meta']['model'] == 'PyramidTNT'
    model = Classifier(
        golden['num_classes'], arch=arch_of(golden['configs']), img_size=64)
    load_checkpoint(model, str(dst), strict=True)
    check_outputs(model, golden['aligned'])


def test_converted_checkpoint_loads_at_another_size(golden):
    checkpoint = convert_pyramid_tnt(
        as_fp32(golden['official_state_dict']))
    model = Classifier(
        golden['num_classes'],
        arch=arch_of(golden['configs']),
        img_size=(96, 128))
    model.load_state_dict(checkpoint['state_dict'], strict=True)
    assert model.backbone.sentence_pos.shape[1] == 12 * 16
    with torch.no_grad():
        features, logits = model.eval()(torch.randn(1, 3, 96, 128))
    assert torch.isfinite(logits).all()


def test_converting_twice_changes_nothing(golden):
    once = convert_pyramid_tnt(as_fp32(golden['official_state_dict']))
    twice = convert_pyramid_tnt(once)
    assert twice['meta']['source_format'] == 'mmtnt'
    assert once['state_dict'].keys() == twice['state_dict'].keys()
    for key, value in once['state_dict'].items():
        assert torch.equal(value, twice['state_dict'][key]), key
