"""Whole Twins detectors and segmentors convert to mmtnt and load strictly
into the config that ``tools/model_converters/twins2mmtnt.py`` names.

* mmseg's own Twins segmentors, built from mmseg's configs with random
  weights, give the same logits as the converted checkpoint in the named
  mmtnt config (fp32, eval), UperNet and Semantic FPN, PCPVT-S and SVT-S;
  the twelve published settings convert to the key set and shapes of their
  configs.
* Segmentors and detectors in the official Twins layout (the backbone in
  timm's = the official names, with the unused ImageNet classifier and
  final norm, SVT's ``norm_list``; heads as mmseg 0.x and mmdet 2.x name
  them, which is as mmseg 1.x and mmdet 3.x do) give the outputs of the
  mmtnt model assembled from the parts.
* ``--backbone-only`` and classification checkpoints give what they gave
  before; heads mmtnt has no config for are refused with their keys.

Inputs are small (64x64), in fp32; no file is downloaded.
"""
import copy
import functools
import re
from unittest import mock

import pytest
import torch
import torch.nn as nn
from demo_runs import describe, run_tool
from equivalence import max_relative_error
from mmengine.config import Config
from mmengine.hub import get_config
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import MODELS, DefaultScope
from mmengine.runner import load_checkpoint

from mmtnt.converters import convert_twins
from mmtnt.converters.dense import detect_head_layout
from mmtnt.models import PCPVT

pytest.importorskip('mmseg')
pytest.importorskip('mmdet')
timm = pytest.importorskip('timm')

TOLERANCE = 1e-5
IMAGE_HW = (64, 64)
# mmtnt's config for each of mmseg's published Twins segmentors.
MMSEG_CONFIGS = {
    f'configs/twins/{algo}_twins-{v}_mmseg_8xb{b}-{iters}_ade20k-512x512.py':
    f'twins_{v}_{head}_8xb{b}-{iters}_ade20k-512x512.py'
    for v in ('pcpvt-s', 'pcpvt-b', 'pcpvt-l', 'svt-s', 'svt-b', 'svt-l')
    for algo, head, iters, b in (
        ('upernet', 'uperhead', '160k', 4 if v == 'pcpvt-s' else 2),
        ('fpn', 'fpn_fpnhead', '80k', 4))
}


@functools.lru_cache(maxsize=None)
def mmseg_config(name):
    return get_config(f'mmseg::twins/{name}')


@functools.lru_cache(maxsize=None)
def mmtnt_config(path):
    return Config.fromfile(path, format_python_code=False)


def build(cfg, device='cpu'):
    """The model of ``cfg`` under its scope, eval mode, plain BatchNorm."""
    # mmseg's Twins reads its drop-path rates with .item(), which the meta
    # device refuses: those few numbers are made on the CPU.
    linspace = functools.partial(torch.linspace, device='cpu')
    with DefaultScope.overwrite_default_scope(cfg.default_scope), \
            torch.device(device), mock.patch('torch.linspace', linspace):
        model = MODELS.build(copy.deepcopy(cfg.model))
    return revert_sync_batchnorm(model).eval()


def randomize_(model, seed):
    """Random weights of the scale of a trained model: every parameter,
    and BatchNorm running statistics."""
    generator = torch.Generator().manual_seed(seed)

    def normal(tensor, mean, std):
        tensor.copy_(
            torch.randn(tensor.shape, generator=generator) * std + mean)

    with torch.no_grad():
        for module in model.modules():
            for name, param in module.named_parameters(recurse=False):
                norm = isinstance(module, (nn.LayerNorm, nn.modules.batchnorm.
                                           _BatchNorm))
                if norm and name == 'weight':
                    normal(param, 1, 0.1)
                elif param.dim() > 1:
                    normal(param, 0, param[0].numel()**-0.5)
                else:
                    normal(param, 0, 0.1)
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                normal(module.running_mean, 0, 0.1)
                module.running_var.copy_(0.5 + torch.rand(
                    module.running_var.shape, generator=generator))
    return model


def images(seed=0):
    return torch.randn(
        1, 3, *IMAGE_HW, generator=torch.Generator().manual_seed(seed))


def convert_cli(src, dst, *args):
    """Run twins2mmtnt.py; return its output and the config it names."""
    result, _ = run_tool(
        ['tools/model_converters/twins2mmtnt.py',
         str(src), str(dst), *args],
        timeout=300)
    assert result.returncode == 0, describe(result)
    config = re.search(r'^Config: (\S+)$', result.stdout, re.M)
    return result.stdout, config.group(1) if config else None


def load_into(model, path):
    """Load ``path`` strictly into a copy of ``model`` whose weights were
    scrambled first, so that every value must come from the file."""
    model = randomize_(copy.deepcopy(model), seed=99)
    load_checkpoint(model, str(path), map_location='cpu', strict=True)
    return model.eval()


def assert_close(actual, expected, label):
    errors = [max_relative_error(a, e) for a, e in zip(actual, expected)]
    assert len(actual) == len(expected)
    print(f'{label}: max relative errors {[f"{e:.1e}" for e in errors]}')
    assert max(errors) < TOLERANCE, (label, errors)


# ---------------------------------------------------------------------------
# mmseg's segmentors
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('config', list(MMSEG_CONFIGS))
def test_mmseg_settings_convert_to_their_configs(config):
    """Each published setting: mmseg's model (meta device) converts to the
    keys and shapes of the mmtnt config the converter names, whose heads
    and test settings are mmseg's."""
    mmseg_cfg = mmseg_config(MMSEG_CONFIGS[config])
    cfg = mmtnt_config(config)
    for key in ('decode_head', 'auxiliary_head', 'neck', 'test_cfg',
                'data_preprocessor'):
        assert strip_scopes(cfg.model.get(key)) == strip_scopes(
            mmseg_cfg.model.get(key)), key
    assert strip_scopes(cfg.test_pipeline) == strip_scopes(
        mmseg_cfg.test_pipeline)
    source = build(mmseg_cfg, device='meta')
    converted = convert_twins({'state_dict': source.state_dict()})
    assert converted['meta']['config'] == config
    assert converted['meta']['cfg_options'] == []
    expected = build(cfg, device='meta').state_dict()
    assert {k: v.shape for k, v in converted['state_dict'].items()} == \
        {k: v.shape for k, v in expected.items()}


def strip_scopes(cfg):
    """A config value without registry scopes (``_scope_``, ``mmseg.``)."""
    if hasattr(cfg, 'to_dict'):
        cfg = cfg.to_dict()
    if isinstance(cfg, dict):
        return {
            k: strip_scopes(v)
            for k, v in cfg.items() if k not in ('_scope_', 'init_cfg')
        }
    if isinstance(cfg, (list, tuple)):
        return [strip_scopes(v) for v in cfg]
    if isinstance(cfg, str):
        return re.sub(r'^(mmseg|mmtnt)\.', '', cfg)
    return cfg


# (mmseg config, mmtnt config, seed): the smallest variants.
MMSEG_CASES = {
    'upernet-pcpvt-s': 'twins_pcpvt-s_uperhead_8xb4-160k_ade20k-512x512.py',
    'fpn-pcpvt-s': 'twins_pcpvt-s_fpn_fpnhead_8xb4-80k_ade20k-512x512.py',
    'upernet-svt-s': 'twins_svt-s_uperhead_8xb2-160k_ade20k-512x512.py',
    'fpn-svt-s': 'twins_svt-s_fpn_fpnhead_8xb4-80k_ade20k-512x512.py',
}


@pytest.fixture(scope='module')
def mmseg_segmentors(tmp_path_factory):
    """Build (once) mmseg's segmentor of a case with random weights, saved
    as mmseg saves its checkpoints; returns (model, path)."""
    cache = {}
    folder = tmp_path_factory.mktemp('mmseg_segmentors')

    def get(case):
        if case not in cache:
            seed = list(MMSEG_CASES).index(case)
            model = randomize_(
                build(mmseg_config(MMSEG_CASES[case])), seed=seed)
            # Tokens of small variance out of the patch embeddings make the
            # blocks' LayerNorm eps visible in the outputs.
            for embed in model.backbone.patch_embeds:
                with torch.no_grad():
                    embed.norm.weight.mul_(0.01)
                    embed.norm.bias.mul_(0.01)
            path = folder / f'{case}.pth'
            torch.save(
                dict(
                    meta=dict(
                        mmseg_version='0.20.0',
                        CLASSES=tuple(f'class{i}' for i in range(150)),
                        PALETTE=[[i, i, i] for i in range(150)]),
                    state_dict=model.state_dict()), path)
            cache[case] = model, path
        return cache[case]

    return get


@pytest.mark.parametrize('case', list(MMSEG_CASES))
def test_mmseg_segmentor_gives_mmseg_logits(case, mmseg_segmentors,
                                            tmp_path):
    reference, src = mmseg_segmentors(case)
    dst = tmp_path / 'converted.pth'
    out, config = convert_cli(src, dst)
    algo, variant = case.split('-', 1)
    assert config.startswith(f'configs/twins/{algo}_twins-{variant}_mmseg_')
    assert '--cfg-options' not in out, out
    model = build(mmtnt_config(config))
    load_checkpoint(model, str(dst), map_location='cpu', strict=True)
    x = images()
    with torch.no_grad():
        expected = reference(x, mode='tensor')
        actual = model(x, mode='tensor')
    assert_close([actual], [expected], f'mmseg {case}')
    # mmtnt's own configs (the official eps, 1e-6) would not reproduce it.
    for name, module in model.backbone.named_modules():
        if re.search(r'(norm1|norm2|stages\.\d+\.norm)$', name):
            module.eps = 1e-6
    with torch.no_grad():
        official_eps = model(x, mode='tensor')
    assert max_relative_error(official_eps, expected) > 1e-3
    saved = torch.load(dst, weights_only=True)
    assert saved['meta']['dataset_meta']['classes'][:2] == [
        'class0', 'class1'
    ]


def test_backbone_only_keeps_the_backbone(mmseg_segmentors, tmp_path):
    _, src = mmseg_segmentors('fpn-pcpvt-s')
    whole = torch.load(src, weights_only=True)
    converted = convert_twins(whole)
    dst = tmp_path / 'backbone.pth'
    out, config = convert_cli(src, dst, '--backbone-only')
    assert config is None
    assert ("dict(type='mmtnt.PCPVT', arch='s', norm_after_stage=[False, "
            "False, False, False])") in out, out
    saved = torch.load(dst, weights_only=True)
    assert 'head_layout' not in saved['meta']
    # the whole model's backbone, nothing else
    backbone = {
        k: v
        for k, v in converted['state_dict'].items()
        if k.startswith('backbone.')
    }
    assert saved['state_dict'].keys() == backbone.keys()
    for key, value in backbone.items():
        torch.testing.assert_close(saved['state_dict'][key], value)
    # and a backbone loads it as before, as pretrained weights
    model = PCPVT(
        arch='s',
        norm_after_stage=False,
        out_indices=(0, 1, 2, 3),
        out_type='featmap',
        init_cfg=dict(
            type='Pretrained', checkpoint=str(dst), prefix='backbone.'))
    model.init_weights()
    assert {f'backbone.{k}' for k in model.state_dict()} == backbone.keys()


# ---------------------------------------------------------------------------
# the official Twins layout (segmentation: mmseg 0.x, detection: mmdet 2.x)
# ---------------------------------------------------------------------------
TIMM_NAMES = {'pcpvt': 'twins_pcpvt_small', 'svt': 'twins_svt_small'}


@functools.lru_cache(maxsize=None)
def official_backbone(kind, seed=0):
    """The backbone weights of an official dense model: timm's names (those
    of the official code) with the ImageNet classifier and final norm it
    keeps unused, and for SVT the norms after its stages."""
    model = timm.create_model(TIMM_NAMES[kind], pretrained=False,
                              device='meta').to_empty(device='cpu')
    state_dict = randomize_(model, seed).state_dict()
    if kind == 'svt':
        generator = torch.Generator().manual_seed(seed + 1)
        for i, dims in enumerate((64, 128, 256, 512)):
            state_dict[f'norm_list.{i}.weight'] = 1 + 0.1 * torch.randn(
                dims, generator=generator)
            state_dict[f'norm_list.{i}.bias'] = 0.1 * torch.randn(
                dims, generator=generator)
    return state_dict


def assembled(config, kind, seed):
    """The model of ``config`` with random heads and the official backbone
    loaded by the classification conversion (tested against timm in
    test_twins_equivalence.py), its stage norms set by hand. Returns the
    model and the official checkpoint holding the same weights."""
    model = randomize_(build(mmtnt_config(config)), seed)
    official = official_backbone(kind)
    classifier = {
        k: v
        for k, v in official.items() if not k.startswith('norm_list.')
    }
    backbone = {
        k[len('backbone.'):]: v
        for k, v in convert_twins(classifier)['state_dict'].items()
        if k.startswith('backbone.')
    }
    # The dense code does not use the final norm; SVT's stage norms are
    # norm_list.
    backbone = {
        k: v
        for k, v in backbone.items() if not k.startswith('stages.3.norm.')
    }
    if kind == 'svt':
        for i in range(4):
            for p in ('weight', 'bias'):
                backbone[f'stages.{i}.norm.{p}'] = official[
                    f'norm_list.{i}.{p}']
    model.backbone.load_state_dict(backbone, strict=True)
    # mmseg 0.x and mmdet 2.x name these heads as mmseg 1.x and mmdet 3.x
    # do: the official checkpoint holds them under the same keys.
    state_dict = {f'backbone.{k}': v for k, v in official.items()}
    state_dict.update({
        k: v
        for k, v in model.state_dict().items() if not k.startswith('backbone.')
    })
    return model, state_dict


OFFICIAL_SEG_CASES = {
    'upernet-pcpvt': 'configs/twins/'
    'upernet_twins-pcpvt-s_8xb4-160k_ade20k-512x512.py',
    'fpn-svt': 'configs/twins/fpn_twins-svt-s_8xb2-80k_ade20k-512x512.py',
}


@pytest.mark.parametrize('case', list(OFFICIAL_SEG_CASES))
def test_official_segmentor(case, tmp_path):
    config = OFFICIAL_SEG_CASES[case]
    reference, state_dict = assembled(config, case.split('-')[1], seed=11)
    src, dst = tmp_path / 'official.pth', tmp_path / 'converted.pth'
    torch.save(dict(meta=dict(mmseg_version='0.13.0'), state_dict=state_dict),
               src)
    out, named = convert_cli(src, dst)
    assert named == config, out
    assert 'official Twins segmentation code' in out, out
    model = load_into(reference, dst)
    x = images(seed=1)
    with torch.no_grad():
        assert_close([model(x, mode='tensor')], [reference(x, mode='tensor')],
                     f'official {case}')


OFFICIAL_DET_CASES = {
    'retinanet-pcpvt': 'configs/twins/retinanet_twins-pcpvt-s_fpn_1x_coco.py',
    'mask-rcnn-svt': 'configs/twins/mask-rcnn_twins-svt-s_fpn_1x_coco.py',
}


def raw_outputs(model, x):
    """Backbone and neck maps and the heads' raw outputs (no boxes)."""
    feats = model.extract_feat(x)
    outs = list(model.backbone(x)) + list(feats)
    if hasattr(model, 'roi_head'):
        cls_scores, bbox_preds = model.rpn_head(feats)
        rois = torch.tensor([[0., 4., 6., 40., 50.], [0., 20., 2., 60., 30.]])
        bbox = model.roi_head._bbox_forward(feats, rois)
        mask = model.roi_head._mask_forward(feats, rois)
        outs += [bbox['cls_score'], bbox['bbox_pred'], mask['mask_preds']]
    else:
        cls_scores, bbox_preds = model.bbox_head(feats)
    return outs + list(cls_scores) + list(bbox_preds)


@pytest.mark.parametrize('case', list(OFFICIAL_DET_CASES))
def test_official_detector(case, tmp_path):
    config = OFFICIAL_DET_CASES[case]
    reference, state_dict = assembled(config, case.split('-')[-1], seed=12)
    src, dst = tmp_path / 'official.pth', tmp_path / 'converted.pth'
    classes = tuple(f'class{i}' for i in range(80))
    torch.save(
        dict(
            meta=dict(mmdet_version='2.8.0', CLASSES=classes),
            state_dict=state_dict), src)
    out, named = convert_cli(src, dst)
    assert named == config, out
    assert 'official Twins detection code (mmdet 2.x)' in out, out
    model = load_into(reference, dst)
    x = images(seed=2)
    with torch.no_grad():
        assert_close(raw_outputs(model, x), raw_outputs(reference, x),
                     f'official {case}')
    meta = torch.load(dst, weights_only=True)['meta']
    assert meta['dataset_meta']['classes'] == list(classes)


# ---------------------------------------------------------------------------
# what does not change, and what is refused
# ---------------------------------------------------------------------------
def test_classification_checkpoint_is_unaffected():
    official = official_backbone('pcpvt')
    converted = convert_twins(dict(official))
    assert 'head_layout' not in converted['meta']
    assert converted['meta']['norm_after_stage'] == [False] * 3 + [True]
    assert {'head.fc.weight', 'head.fc.bias'} <= converted['state_dict'].keys()
    again = convert_twins(dict(official), backbone_only=True)
    assert again['state_dict'].keys() == converted['state_dict'].keys()


@pytest.fixture(scope='module')
def mmseg_fpn_weights():
    """mmseg's Semantic FPN PCPVT-S on the meta device (keys and shapes)."""
    model = build(
        mmseg_config(MMSEG_CASES['fpn-pcpvt-s']), device='meta')
    return model.state_dict()


def test_unknown_heads_are_named(mmseg_fpn_weights):
    backbone = {
        k: v
        for k, v in mmseg_fpn_weights.items() if k.startswith('backbone.')
    }
    aspp = dict(
        backbone, **{
            'decode_head.aspp_modules.0.conv.weight': torch.zeros(1),
            'decode_head.aspp_modules.1.conv.weight': torch.zeros(1),
            'decode_head.conv_seg.weight': torch.zeros(1),
        })
    with pytest.raises(ValueError, match=r'could not place: .*'
                       r'decode_head\.aspp_modules\.0\.conv\.weight'):
        convert_twins(aspp)
    # a known model with a key it has no place for
    extra = dict(mmseg_fpn_weights)
    extra['auxiliary_head.conv_seg.weight'] = torch.zeros(1)
    with pytest.raises(ValueError, match=r'Semantic FPN.*no place.*'
                       r'auxiliary_head\.conv_seg\.weight'):
        convert_twins(extra)
    # Faster R-CNN: no mmtnt config
    with pytest.raises(ValueError, match=r'rpn_head\.rpn_cls\.weight'):
        detect_head_layout({
            'rpn_head.rpn_cls.weight': torch.zeros(1),
            'roi_head.bbox_head.fc_cls.weight': torch.zeros(1),
        })
    # the backbone alone still converts
    converted = convert_twins(aspp, backbone_only=True)
    assert all(k.startswith('backbone.') for k in converted['state_dict'])


def test_other_classes_and_norms_are_suggested(mmseg_fpn_weights):
    weights = dict(mmseg_fpn_weights)
    weights['decode_head.conv_seg.weight'] = torch.zeros(19, 128, 1, 1)
    weights['decode_head.conv_seg.bias'] = torch.zeros(19)
    for i, dims in enumerate((64, 128, 320, 512)):
        weights[f'backbone.norm_list.{i}.weight'] = torch.ones(dims)
        weights[f'backbone.norm_list.{i}.bias'] = torch.zeros(dims)
    meta = convert_twins(weights)['meta']
    assert meta['num_classes'] == 19
    assert meta['config'] == \
        'configs/twins/fpn_twins-pcpvt-s_mmseg_8xb4-80k_ade20k-512x512.py'
    assert meta['cfg_options'] == [
        'model.backbone.norm_after_stage=[True,True,True,True]',
        'model.decode_head.num_classes=19'
    ]
