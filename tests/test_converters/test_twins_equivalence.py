"""The same random weights in timm's, mmpretrain's and mmseg's Twins,
converted, give the same outputs in mmtnt (fp32, eval).

LayerNorm eps is not in the weights: timm (= the official code) uses 1e-6 in
the blocks and the final norm and 1e-5 in the patch embeddings and after
GSA's reduction (mmtnt's defaults); mmpretrain's configs use 1e-6 (PCPVT) or
1e-5 (SVT) for blocks and reductions with 1e-5 patch embeddings; mmseg uses
1e-5 everywhere. Each comparison builds mmtnt with the reference's eps.
"""
import functools
import importlib.util
import subprocess
import sys
import types
from argparse import Namespace
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from equivalence import max_relative_error, randomize_
from mmengine.runner import load_checkpoint

from mmtnt.converters import convert_twins, detect_twins_format
from mmtnt.converters.cli import run_converter as run_converter_main
from mmtnt.models import PCPVT, SVT

timm = pytest.importorskip('timm')
REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-5
MMTNT = {'PCPVT': PCPVT, 'SVT': SVT}

TIMM_VARIANTS = {
    'twins_pcpvt_small': ('PCPVT', 's'),
    'twins_pcpvt_base': ('PCPVT', 'b'),
    'twins_pcpvt_large': ('PCPVT', 'l'),
    'twins_svt_small': ('SVT', 's'),
    'twins_svt_base': ('SVT', 'b'),
    'twins_svt_large': ('SVT', 'l'),
}
# timm's LSA pads without a mask, so SVT is compared where the 7x7 windows
# tile every stage (224 = 7 * 32); PCPVT at a small non-square size.
TIMM_SIZES = {'PCPVT': (96, 64), 'SVT': (224, 224)}
LN = functools.partial(dict, type='LN')
# mmtnt norm settings matching each reference.
EPS_TIMM = dict()  # mmtnt's defaults are the official values
EPS_1E5 = dict(
    norm_cfg=LN(eps=1e-5),
    patch_norm_cfg=LN(eps=1e-5),
    sr_norm_cfg=LN(eps=1e-5))


class Classifier(nn.Module):
    """An mmtnt backbone with a linear head, laid out like mmpretrain's
    ImageClassifier (``backbone.``, ``head.fc.``)."""

    def __init__(self, model, **backbone_cfg):
        super().__init__()
        self.backbone = MMTNT[model](**backbone_cfg)
        self.head = nn.Module()
        self.head.fc = nn.Linear(self.backbone.embed_dims[-1], 1000)

    def forward(self, x):
        return self.head.fc(self.backbone(x)[-1])


def load_converted(checkpoint, **backbone_cfg):
    meta = checkpoint['meta']
    model = Classifier(meta['model'], arch=meta['arch'], **backbone_cfg)
    model.load_state_dict(checkpoint['state_dict'], strict=True)
    return model.eval()


def load_backbone(checkpoint, **backbone_cfg):
    meta = checkpoint['meta']
    model = MMTNT[meta['model']](arch=meta['arch'], **backbone_cfg)
    weights = {
        k[len('backbone.'):]: v
        for k, v in checkpoint['state_dict'].items()
        if k.startswith('backbone.')
    }
    model.load_state_dict(weights, strict=True)
    return model.eval()


def random_weights_(model, seed, scale=0.05):
    """Fill every parameter with random values: weights N(0, 1/fan_in),
    LayerNorm scales N(1, scale), other 1-d parameters N(0, scale).

    Quicker than initialising a large model and then perturbing it (as
    ``randomize_`` does); no parameter keeps a structured value."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            for name, param in module.named_parameters(recurse=False):
                if isinstance(module, nn.LayerNorm) and name == 'weight':
                    param.normal_(1, scale, generator=generator)
                elif param.dim() > 1:
                    param.normal_(0, param[0].numel()**-0.5,
                                  generator=generator)
                else:
                    param.normal_(0, scale, generator=generator)
    return model


@functools.lru_cache(maxsize=None)
def timm_model(name, seed=0):
    """A timm Twins with random weights, built without initialising it."""
    model = timm.create_model(name, pretrained=False, device='meta')
    assert not list(model.buffers())
    return random_weights_(model.to_empty(device='cpu'), seed).eval()


def images(size, seed=1):
    return torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(
        seed))


@pytest.mark.parametrize('name', list(TIMM_VARIANTS))
def test_timm_equivalence(name):
    reference = timm_model(name)
    checkpoint = convert_twins(reference.state_dict())
    meta = checkpoint['meta']
    assert meta['source_format'] == 'official'
    assert (meta['model'], meta['arch']) == TIMM_VARIANTS[name]
    model = load_converted(checkpoint, **EPS_TIMM)
    x = images(TIMM_SIZES[meta['model']])
    with torch.no_grad():
        error = max_relative_error(model(x), reference(x))
    print(f'{name}: max relative error {error:.1e}')
    assert error < TOLERANCE, f'{name}: relative error {error:.2e}'


def load_tool(package, filename):
    """Import an OpenMMLab converter script shipped in a package's ``.mim``
    folder; None when the package does not ship it."""
    module = pytest.importorskip(package)
    path = Path(module.__file__).parent / '.mim/tools/model_converters' / \
        filename
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(path.stem, path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


@pytest.mark.parametrize('name', ['twins_pcpvt_small', 'twins_svt_small'])
def test_twins2mmpretrain_output_loads(name, monkeypatch):
    # The script imports mmcv 1.x's CheckpointLoader, used only by its CLI.
    monkeypatch.setitem(sys.modules, 'mmcv.runner',
                        types.SimpleNamespace(CheckpointLoader=None))
    tool = load_tool('mmpretrain', 'twins2mmpretrain.py')
    if tool is None:
        pytest.skip('mmpretrain does not ship twins2mmpretrain.py')
    reference = timm_model(name)
    mmpretrain_ckpt = tool.convert_twins(None, reference.state_dict())
    checkpoint = convert_twins(mmpretrain_ckpt)
    assert checkpoint['meta']['source_format'] == 'mmpretrain'
    model = load_converted(checkpoint, **EPS_TIMM)
    x = images(TIMM_SIZES[checkpoint['meta']['model']], seed=2)
    with torch.no_grad():
        error = max_relative_error(model(x), reference(x))
    print(f'twins2mmpretrain {name}: max relative error {error:.1e}')
    assert error < TOLERANCE, f'relative error {error:.2e}'


@pytest.mark.parametrize('name', ['twins_pcpvt_small', 'twins_svt_small'])
def test_twins2mmseg_output_loads(name):
    tool = load_tool('mmseg', 'twins2mmseg.py')
    if tool is None:
        pytest.skip('mmseg does not ship twins2mmseg.py')
    reference = timm_model(name)
    kind = 'svt' if 'svt' in name else 'pcpvt'
    mmseg_ckpt = tool.convert_twins(Namespace(model=kind),
                                    reference.state_dict())
    checkpoint = convert_twins(mmseg_ckpt)
    meta = checkpoint['meta']
    assert meta['source_format'] == 'mmseg'
    # twins2mmseg.py keeps the official final norm and drops the head.
    assert meta['norm_after_stage'] == [False, False, False, True]
    model = load_backbone(checkpoint, **EPS_TIMM)
    x = images(TIMM_SIZES[meta['model']], seed=3)
    with torch.no_grad():
        expected = reference.forward_features(x).mean(dim=1)
        error = max_relative_error(model(x)[-1], expected)
    print(f'twins2mmseg {name}: max relative error {error:.1e}')
    assert error < TOLERANCE, f'relative error {error:.2e}'


def mmpretrain_classifier(backbone_cfg, in_channels):
    from mmpretrain.registry import MODELS
    return MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=backbone_cfg,
            neck=dict(type='GlobalAveragePooling'),
            head=dict(
                type='LinearClsHead',
                num_classes=1000,
                in_channels=in_channels,
                loss=dict(type='CrossEntropyLoss'))))


# mmpretrain's configs (configs/_base_/models/twins_*_base.py): qkv bias,
# the final norm after the last stage, and eps 1e-6 (PCPVT) / 1e-5 (SVT) for
# blocks and GSA reductions; its patch embeddings always use 1e-5.
MMPRETRAIN_CASES = {
    'PCPVT': (dict(norm_cfg=LN(eps=1e-6)),
              dict(norm_cfg=LN(eps=1e-6), sr_norm_cfg=LN(eps=1e-6)),
              (97, 131)),
    # A size whose stages all need right and bottom padding for LSA, where
    # mmpretrain's mask is right.
    'SVT': (dict(norm_cfg=LN()), EPS_1E5, (93, 125)),
}


@pytest.mark.parametrize('model_name', list(MMPRETRAIN_CASES))
def test_mmpretrain_equivalence(model_name):
    pytest.importorskip('mmpretrain')
    ref_norm, mmtnt_norm, size = MMPRETRAIN_CASES[model_name]
    reference = mmpretrain_classifier(
        dict(
            type=model_name,
            arch='small',
            qkv_bias=True,
            norm_after_stage=[False, False, False, True],
            **ref_norm), 512)
    randomize_(reference, seed=5).eval()
    checkpoint = convert_twins({'state_dict': reference.state_dict()})
    meta = checkpoint['meta']
    assert meta['source_format'] == 'mmpretrain'
    assert (meta['model'], meta['arch']) == (model_name, 's')
    model = load_converted(checkpoint, **mmtnt_norm)
    x = images(size, seed=4)
    with torch.no_grad():
        error = max_relative_error(model(x), reference(x, mode='tensor'))
    print(f'mmpretrain {model_name}: max relative error {error:.1e}')
    assert error < TOLERANCE, f'relative error {error:.2e}'


# mmseg's configs (configs/_base_/models/twins_pcpvt-s_fpn.py,
# configs/twins/twins_svt-s_*): no stage norms for PCPVT, one after every
# stage for SVT. Sizes as above: odd, with both LSA pads non-zero.
MMSEG_CASES = {
    'PCPVT':
    (dict(
        embed_dims=[64, 128, 320, 512],
        num_heads=[1, 2, 5, 8],
        mlp_ratios=[8, 8, 4, 4],
        depths=[3, 4, 6, 3],
        norm_after_stage=False), (97, 131)),
    'SVT': (dict(
        embed_dims=[64, 128, 256, 512],
        num_heads=[2, 4, 8, 16],
        mlp_ratios=[4, 4, 4, 4],
        depths=[2, 2, 10, 4],
        windiow_sizes=[7, 7, 7, 7],
        norm_after_stage=True), (93, 125)),
}


def mmseg_backbone(model_name):
    from mmseg.registry import MODELS
    cfg, _ = MMSEG_CASES[model_name]
    return MODELS.build(
        dict(
            type=model_name,
            qkv_bias=True,
            drop_path_rate=0.,
            out_indices=(0, 1, 2, 3),
            sr_ratios=[8, 4, 2, 1],
            **cfg))


@pytest.mark.parametrize('model_name', list(MMSEG_CASES))
def test_mmseg_equivalence(model_name):
    pytest.importorskip('mmseg')
    reference = randomize_(mmseg_backbone(model_name), seed=6).eval()
    # As a segmentor checkpoint, backbone only: the rest of the model is
    # dropped (test_twins_whole_model.py converts whole segmentors).
    segmentor = {f'backbone.{k}': v for k, v in reference.state_dict().items()}
    segmentor['decode_head.conv_seg.weight'] = torch.zeros(150, 512, 1, 1)
    checkpoint = convert_twins({'state_dict': segmentor, 'meta': {}},
                               backbone_only=True)
    meta = checkpoint['meta']
    assert meta['source_format'] == 'mmseg'
    assert (meta['model'], meta['arch']) == (model_name, 's')
    norms = MMSEG_CASES[model_name][0]['norm_after_stage']
    assert meta['norm_after_stage'] == [norms] * 4
    model = load_backbone(
        checkpoint,
        out_indices=(0, 1, 2, 3),
        out_type='featmap',
        norm_after_stage=norms,
        **EPS_1E5)
    x = images(MMSEG_CASES[model_name][1], seed=7)
    with torch.no_grad():
        outs, expected = model(x), reference(x)
    errors = [max_relative_error(a, b) for a, b in zip(outs, expected)]
    print(f'mmseg {model_name}: max relative errors per stage '
          f'{[f"{e:.1e}" for e in errors]}')
    assert [o.shape for o in outs] == [e.shape for e in expected]
    assert max(errors) < TOLERANCE, errors


def test_mmseg_lsa_mask_is_wrong_when_one_pad_is_zero():
    """Why mmtnt masks differently: with one pad zero, mmseg's (and
    mmpretrain's) LSA lets padded tokens into the windows."""
    pytest.importorskip('mmseg')
    from mmseg.models.backbones.twins import LocallyGroupedSelfAttention

    from mmtnt.models.layers import LocallyGroupedAttention
    torch.manual_seed(0)
    ours = LocallyGroupedAttention(32, 4, window_size=7,
                                   qkv_bias=True).eval()
    theirs = LocallyGroupedSelfAttention(
        32, 4, qkv_bias=True, window_size=7).eval()
    theirs.load_state_dict(ours.state_dict())
    for hw_shape, agree in [((10, 12), True), ((14, 12), False),
                            ((10, 14), False)]:
        x = torch.randn(1, hw_shape[0] * hw_shape[1], 32)
        with torch.no_grad():
            same = torch.allclose(ours(x, hw_shape), theirs(x, hw_shape),
                                  atol=1e-6)
        assert same == agree, hw_shape


def official_checkpoint(timm_state_dict):
    """What the official release holds: the same keys as timm, under
    ``model``, with the training arguments pickled beside them."""
    return {'model': dict(timm_state_dict), 'args': Namespace(lr=5e-4)}


def run_converter(*args):
    return subprocess.run(
        [sys.executable, 'tools/model_converters/twins2mmtnt.py', *args],
        cwd=REPO, capture_output=True, text=True)


def test_converter_cli(tmp_path):
    reference = timm_model('twins_pcpvt_small')
    src = tmp_path / 'pcpvt_small.pth'
    torch.save(official_checkpoint(reference.state_dict()), src)
    dst = tmp_path / 'converted.pth'

    # Refused without --allow-pickle (checked in this process, through the
    # script's own pieces: a second interpreter start is slow).
    spec = importlib.util.spec_from_file_location(
        'twins2mmtnt', REPO / 'tools/model_converters/twins2mmtnt.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with pytest.raises(RuntimeError, match='--allow-pickle'):
        run_converter_main(tool.convert_twins, 'Twins', tool.backbone_kwargs,
                           argv=[str(src), str(dst)])
    assert not dst.exists()

    done = run_converter(str(src), str(dst), '--allow-pickle')
    assert done.returncode == 0, done.stderr
    assert "dict(type='mmtnt.PCPVT', arch='s')" in done.stdout

    # The output loads safely (weights_only) and through mmengine.
    saved = torch.load(dst, weights_only=True)
    assert saved['meta']['source_format'] == 'official'
    model = Classifier('PCPVT', arch='s').eval()
    load_checkpoint(model, str(dst), strict=True)
    x = images((64, 64), seed=8)
    with torch.no_grad():
        assert max_relative_error(model(x), reference(x)) < TOLERANCE

    # As a detector's or segmentor's pretrained backbone.
    backbone = PCPVT(
        arch='s',
        out_indices=(0, 1, 2, 3),
        out_type='featmap',
        init_cfg=dict(
            type='Pretrained', checkpoint=str(dst), prefix='backbone.'))
    backbone.init_weights()
    for key, value in backbone.state_dict().items():
        torch.testing.assert_close(value,
                                   saved['state_dict'][f'backbone.{key}'])


def test_mmtnt_checkpoint_converts_to_itself():
    model = Classifier('SVT', arch='s')
    checkpoint = convert_twins({'state_dict': model.state_dict()})
    assert checkpoint['meta']['source_format'] == 'mmtnt'
    assert checkpoint['meta']['model'] == 'SVT'
    assert checkpoint['state_dict'].keys() == model.state_dict().keys()


def test_not_a_twins_checkpoint():
    with pytest.raises(ValueError, match='Not a Twins checkpoint'):
        detect_twins_format({'conv.weight': torch.zeros(1)})
    weights = timm_model('twins_pcpvt_small').state_dict()
    weights = dict(weights, cls_token=torch.zeros(1, 1, 512))
    with pytest.raises(ValueError, match="Unexpected keys.*'cls_token'"):
        convert_twins(weights)
