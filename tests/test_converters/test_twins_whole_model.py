"""Whole Twins detectors and segmentors convert to mmtnt and load strictly
into the config that ``tools/model_converters/twins2mmtnt.py`` names.

* mmseg's own Twins segmentors, built from mmseg's configs with random
  weights, give the same logits as the converted checkpoint in the named
  mmtnt config (fp32, eval), UperNet and Semantic FPN, PCPVT-S and SVT-S;
  the twelve published settings convert to the key set and shapes of their
  configs.
* Segmentors and detectors in the official Twins layout, written from the
  official code's names (Meituan-AutoML/Twins ``segmentation/``, mmseg
  0.12, and ``detection/``, mmdet 2.8: the backbone with its unused
  ImageNet classifier and final norm and SVT's ``norm_list``; the heads of
  its UperNet, Semantic FPN, RetinaNet and Mask R-CNN configs), convert,
  load strictly and give the outputs of a reference built without the
  converter: timm's Twins (the official names) run as the official dense
  code runs it, and the heads mmseg and mmdet build from their configs,
  loaded with the same tensors by name.
* ``--backbone-only`` and classification checkpoints give what they gave
  before; heads mmtnt has no config for are refused with their keys.

Inputs are small (64x64; the official SVT models 224x224, where the 7x7
windows tile every stage: where they do not, mmtnt masks the padding, the
official detection code does not, and its segmentation code masks nothing
when one of the two pads is 0), in fp32; no file is downloaded.
"""
import copy
import functools
import math
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
# The official checkpoints are written here from the names the official
# code gives its weights (Meituan-AutoML/Twins segmentation/gvt.py and
# detection/gvt.py, trained with mmseg 0.12 and mmdet 2.8) and the heads its
# configs build; the references are timm's Twins (the official
# classification names) and heads built from mmseg's and mmdet's configs,
# loaded with the same tensors by name. Nothing passes through the converter
# on the way to the reference.
class Weights(dict):
    """Random tensors of a trained model's scale, under given names."""

    def __init__(self, seed):
        super().__init__()
        self.generator = torch.Generator().manual_seed(seed)

    def normal(self, name, shape, mean=0., std=0.1):
        self[name] = torch.randn(
            shape, generator=self.generator) * std + mean

    def layer(self, name, *shape, bias=True):
        """``nn.Linear``/``nn.Conv2d`` (``shape``: out, in, kernel)."""
        self.normal(f'{name}.weight', shape, std=math.prod(shape[1:])**-0.5)
        if bias:
            self.normal(f'{name}.bias', shape[:1])

    def norm(self, name, dims, scale=1.):
        self.normal(f'{name}.weight', (dims, ), mean=scale, std=0.1 * scale)
        self.normal(f'{name}.bias', (dims, ), std=0.1 * scale)

    def conv_module(self, name, out, inp, kernel, bn=True):
        """mmcv's ``ConvModule``: ``conv`` (no bias before a norm) and a
        BatchNorm (mmcv names it ``bn``)."""
        self.layer(f'{name}.conv', out, inp, kernel, kernel, bias=not bn)
        if bn:
            self.norm(f'{name}.bn', out)
            self.normal(f'{name}.bn.running_mean', (out, ))
            self[f'{name}.bn.running_var'] = 0.5 + torch.rand(
                out, generator=self.generator)
            self[f'{name}.bn.num_batches_tracked'] = torch.tensor(100)


# The official dense backbones, pcpvt_small(_v0) and alt_gvt_small.
OFFICIAL_ARCHS = {
    'pcpvt': dict(dims=(64, 128, 320, 512), depths=(3, 4, 6, 3),
                  mlp_ratios=(8, 8, 4, 4), timm='twins_pcpvt_small'),
    'svt': dict(dims=(64, 128, 256, 512), depths=(2, 2, 10, 4),
                mlp_ratios=(4, 4, 4, 4), timm='twins_svt_small'),
}


def official_backbone(weights, kind, prefix='backbone.'):
    """The backbone as the official dense code names it: ``CPVTV2``
    (PCPVT) and ``ALTGVT`` (SVT) with their ``patch_embeds``, ``blocks``
    (GSA ``Attention``: ``q``, ``kv``, ``sr`` and ``norm`` where it
    sub-samples; SVT's even blocks ``GroupAttention``: ``qkv``),
    ``pos_block`` (``PosCNN``), the final ``norm`` and ImageNet ``head``
    they keep unused, and SVT's ``norm_list`` (``extra_norm=True``)."""
    arch = OFFICIAL_ARCHS[kind]
    previous = 3
    for i, (dims, depth, ratio) in enumerate(
            zip(arch['dims'], arch['depths'], arch['mlp_ratios'])):
        patch, sr = (4 if i == 0 else 2), 8 >> i
        embed = f'{prefix}patch_embeds.{i}'
        weights.layer(f'{embed}.proj', dims, previous, patch, patch)
        # Small tokens make the blocks' LayerNorm eps show in the outputs.
        weights.norm(f'{embed}.norm', dims, scale=0.01)
        for j in range(depth):
            block = f'{prefix}blocks.{i}.{j}'
            weights.norm(f'{block}.norm1', dims)
            if kind == 'svt' and j % 2 == 0:
                weights.layer(f'{block}.attn.qkv', 3 * dims, dims)
            else:
                weights.layer(f'{block}.attn.q', dims, dims)
                weights.layer(f'{block}.attn.kv', 2 * dims, dims)
                if sr > 1:
                    weights.layer(f'{block}.attn.sr', dims, dims, sr, sr)
                    weights.norm(f'{block}.attn.norm', dims)
            weights.layer(f'{block}.attn.proj', dims, dims)
            weights.norm(f'{block}.norm2', dims)
            weights.layer(f'{block}.mlp.fc1', ratio * dims, dims)
            weights.layer(f'{block}.mlp.fc2', dims, ratio * dims)
        weights.layer(f'{prefix}pos_block.{i}.proj.0', dims, 1, 3, 3)
        if kind == 'svt':
            weights.norm(f'{prefix}norm_list.{i}', dims)
        previous = dims
    weights.norm(f'{prefix}norm', previous)
    weights.layer(f'{prefix}head', 1000, previous)
    return weights


def official_fpn(weights, in_channels, start_level=0, extra_convs=0):
    """mmseg 0.x's and mmdet 2.x's ``FPN`` (256 channels, no norm); extra
    convs on the input (``add_extra_convs='on_input'``)."""
    for i, channels in enumerate(in_channels[start_level:]):
        weights.conv_module(f'neck.lateral_convs.{i}', 256, channels, 1,
                            bn=False)
        weights.conv_module(f'neck.fpn_convs.{i}', 256, 256, 3, bn=False)
    for k in range(extra_convs):
        weights.conv_module(
            f'neck.fpn_convs.{len(in_channels) - start_level + k}', 256,
            256 if k else in_channels[-1], 3, bn=False)


def official_upernet(weights, in_channels):
    """upernet_*_swin_setting.py (on ``_base_/models/upernet_r50.py``):
    mmseg 0.x's ``UPerHead`` (512 channels, pool scales 1, 2, 3, 6) and
    ``FCNHead`` auxiliary (one conv, 256 channels, on stage 2)."""
    head = 'decode_head'
    for i in range(4):
        weights.conv_module(f'{head}.psp_modules.{i}.1', 512, in_channels[-1],
                            1)
    weights.conv_module(f'{head}.bottleneck', 512, in_channels[-1] + 4 * 512,
                        3)
    for i, channels in enumerate(in_channels[:-1]):
        weights.conv_module(f'{head}.lateral_convs.{i}', 512, channels, 1)
        weights.conv_module(f'{head}.fpn_convs.{i}', 512, 512, 3)
    weights.conv_module(f'{head}.fpn_bottleneck', 512, 4 * 512, 3)
    weights.layer(f'{head}.conv_seg', 150, 512, 1, 1)
    weights.conv_module('auxiliary_head.convs.0', 256, in_channels[2], 3)
    weights.layer('auxiliary_head.conv_seg', 150, 256, 1, 1)


def official_semantic_fpn(weights, in_channels):
    """fpn_*_80k_ade20k.py (on ``_base_/models/fpn_r50.py``): ``FPN`` and
    mmseg 0.x's ``FPNHead`` (128 channels; 1, 1, 2 and 3 convs per scale,
    each but the first scale's followed by an upsampling)."""
    official_fpn(weights, in_channels)
    for i, convs in enumerate((1, 1, 2, 3)):
        for k in range(convs):
            weights.conv_module(f'decode_head.scale_heads.{i}.{2 * k}', 128,
                                128 if k else 256, 3)
    weights.layer('decode_head.conv_seg', 150, 128, 1, 1)


def official_retinanet(weights, in_channels):
    """retinanet_*_1x_coco_pvt_setting.py (on
    ``_base_/models/retinanet_r50_fpn.py``): ``FPN`` from stage 1 with two
    extra convs, mmdet 2.x's ``RetinaHead`` (4 convs per branch, 9 anchors,
    80 sigmoid classes)."""
    official_fpn(weights, in_channels, start_level=1, extra_convs=2)
    for branch in ('cls_convs', 'reg_convs'):
        for i in range(4):
            weights.conv_module(f'bbox_head.{branch}.{i}', 256, 256, 3,
                                bn=False)
    weights.layer('bbox_head.retina_cls', 9 * 80, 256, 3, 3)
    weights.layer('bbox_head.retina_reg', 9 * 4, 256, 3, 3)


def official_mask_rcnn(weights, in_channels):
    """mask_rcnn_*_1x_coco_pvt_setting.py (on
    ``_base_/models/mask_rcnn_r50_fpn.py``): ``FPN``, mmdet 2.x's
    ``RPNHead`` (3 anchors, sigmoid), ``Shared2FCBBoxHead`` (1024, 80
    classes and background, class-wise boxes) and ``FCNMaskHead`` (4 convs,
    a deconv ``upsample``)."""
    official_fpn(weights, in_channels)
    weights.layer('rpn_head.rpn_conv', 256, 256, 3, 3)
    weights.layer('rpn_head.rpn_cls', 3, 256, 1, 1)
    weights.layer('rpn_head.rpn_reg', 3 * 4, 256, 1, 1)
    bbox, mask = 'roi_head.bbox_head', 'roi_head.mask_head'
    weights.layer(f'{bbox}.shared_fcs.0', 1024, 256 * 7 * 7)
    weights.layer(f'{bbox}.shared_fcs.1', 1024, 1024)
    weights.layer(f'{bbox}.fc_cls', 80 + 1, 1024)
    weights.layer(f'{bbox}.fc_reg', 80 * 4, 1024)
    for i in range(4):
        weights.conv_module(f'{mask}.convs.{i}', 256, 256, 3, bn=False)
    # ConvTranspose2d: weight (in, out, k, k)
    weights.layer(f'{mask}.upsample', 256, 256, 2, 2)
    weights.layer(f'{mask}.conv_logits', 80, 256, 1, 1)


class OfficialTwins(nn.Module):
    """timm's Twins modules run as the official dense code runs them
    (``forward_features`` of ``CPVTV2``/``ALTGVT``): each stage's map,
    through ``norm_list`` (LayerNorm eps 1e-6) where there is one, fed to the
    next stage. The final norm and ImageNet head stay unused."""

    def __init__(self, kind):
        super().__init__()
        arch = OFFICIAL_ARCHS[kind]
        model = timm.create_model(arch['timm'], device='meta')
        for name in ('patch_embeds', 'blocks', 'pos_block', 'norm', 'head'):
            setattr(self, name, getattr(model, name))
        if kind == 'svt':
            self.norm_list = nn.ModuleList(
                nn.LayerNorm(dims, eps=1e-6) for dims in arch['dims'])
        self.to_empty(device='cpu')

    def forward(self, x):
        outs = []
        for i, (embed, blocks, peg) in enumerate(
                zip(self.patch_embeds, self.blocks, self.pos_block)):
            x, size = embed(x)
            for j, block in enumerate(blocks):
                x = block(x, size)
                if j == 0:
                    x = peg(x, size)
            if hasattr(self, 'norm_list'):
                x = self.norm_list[i](x)
            x = x.transpose(1, 2).reshape(x.shape[0], -1, *size)
            outs.append(x)
        return outs


# case: mmtnt config, backbone, input size, official heads, and the
# library config that the official one is based on with what it changes (as
# the official configs write them). The weight conversions mmdet documents
# (upgrade_model_version.py) are from 1.x to 2.0: no 2.x name of these heads
# is renamed for 3.x, and the reference loads them as they are (strictly).
OFFICIAL_CASES = {
    'upernet-pcpvt':
    ('configs/twins/upernet_twins-pcpvt-s_8xb4-160k_ade20k-512x512.py',
     'pcpvt', 64, official_upernet, 'mmseg::_base_/models/upernet_r50.py',
     dict(decode_head=dict(in_channels=[64, 128, 320, 512], num_classes=150),
          auxiliary_head=dict(in_channels=320, num_classes=150))),
    'fpn-svt':
    ('configs/twins/fpn_twins-svt-s_8xb2-80k_ade20k-512x512.py', 'svt', 224,
     official_semantic_fpn, 'mmseg::_base_/models/fpn_r50.py',
     dict(neck=dict(in_channels=[64, 128, 256, 512]),
          decode_head=dict(num_classes=150))),
    'retinanet-pcpvt':
    ('configs/twins/retinanet_twins-pcpvt-s_fpn_1x_coco.py', 'pcpvt', 64,
     official_retinanet, 'mmdet::_base_/models/retinanet_r50_fpn.py',
     dict(neck=dict(in_channels=[64, 128, 320, 512]), bbox_head={})),
    'mask-rcnn-svt':
    ('configs/twins/mask-rcnn_twins-svt-s_fpn_1x_coco.py', 'svt', 224,
     official_mask_rcnn, 'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
     dict(neck=dict(in_channels=[64, 128, 256, 512]), rpn_head={},
          roi_head={})),
}


def official_case(case, seed):
    """The official checkpoint of ``case`` (random weights) and the
    reference holding the same tensors: timm's backbone and the heads mmseg
    or mmdet build from their configs."""
    _, kind, _, write_heads, base, changes = OFFICIAL_CASES[case]
    weights = official_backbone(Weights(seed), kind)
    write_heads(weights, OFFICIAL_ARCHS[kind]['dims'])
    cfg = get_config(base).model
    reference = nn.Module()
    reference.backbone = OfficialTwins(kind)
    with DefaultScope.overwrite_default_scope(base.split('::')[0]):
        for part, change in changes.items():
            setattr(reference, part, MODELS.build(dict(cfg[part], **change)))
    reference.load_state_dict(weights, strict=True)
    return revert_sync_batchnorm(reference).eval(), dict(weights)


def raw_outputs(model, x):
    """Backbone and neck maps and the heads' raw outputs (no boxes)."""
    outs = feats = list(model.backbone(x))
    if hasattr(model, 'neck'):
        feats = model.neck(feats)
        outs = outs + list(feats)
    if hasattr(model, 'decode_head'):
        heads = [model.decode_head, getattr(model, 'auxiliary_head', None)]
        return outs + [head(feats) for head in heads if head is not None]
    if hasattr(model, 'roi_head'):
        cls_scores, bbox_preds = model.rpn_head(feats)
        rois = torch.tensor([[0., 4., 6., 40., 50.], [0., 20., 2., 60., 30.]])
        bbox = model.roi_head._bbox_forward(feats, rois)
        mask = model.roi_head._mask_forward(feats, rois)
        outs += [bbox['cls_score'], bbox['bbox_pred'], mask['mask_preds']]
    else:
        cls_scores, bbox_preds = model.bbox_head(feats)
    return outs + list(cls_scores) + list(bbox_preds)


@pytest.mark.parametrize('case', list(OFFICIAL_CASES))
def test_official_model(case, tmp_path):
    """The official checkpoint converts to the mmtnt config the converter
    names, loads strictly and gives the reference's maps and outputs."""
    config, _, size, _, base, _ = OFFICIAL_CASES[case]
    reference, state_dict = official_case(case, seed=11)
    segmentation = base.startswith('mmseg::')
    classes = tuple(f'class{i}' for i in range(150 if segmentation else 80))
    meta = dict(mmseg_version='0.12.0') if segmentation else dict(
        mmdet_version='2.8.0')
    src, dst = tmp_path / 'official.pth', tmp_path / 'converted.pth'
    torch.save(dict(meta=dict(meta, CLASSES=classes), state_dict=state_dict),
               src)
    out, named = convert_cli(src, dst)
    assert named == config, out
    assert ('official Twins segmentation code (mmseg 0.x)' if segmentation
            else 'official Twins detection code (mmdet 2.x)') in out, out
    model = load_into(build(mmtnt_config(config)), dst)
    x = torch.randn(1, 3, size, size,
                    generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert_close(raw_outputs(model, x), raw_outputs(reference, x),
                     f'official {case}')
    saved = torch.load(dst, weights_only=True)['meta']
    assert saved['dataset_meta']['classes'] == list(classes)


# ---------------------------------------------------------------------------
# what does not change, and what is refused
# ---------------------------------------------------------------------------
def test_classification_checkpoint_is_unaffected():
    official = official_backbone(Weights(0), 'pcpvt', prefix='')
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
