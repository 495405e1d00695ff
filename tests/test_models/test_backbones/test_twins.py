"""Contract tests of mmtnt.PCPVT and mmtnt.SVT over every arch."""
import functools
import math

import pytest
import torch
import torch.nn.functional as F
from mmengine.registry import MODELS as ROOT_MODELS
from tiny_backbones import SVT_TINY as TINY_SVT
from tiny_backbones import TWINS_TINY as TINY

from mmtnt.models import PCPVT, SVT
from mmtnt.models.layers import (LocallyGroupedAttention,
                                 SpatialReductionAttention)

MODELS = {'PCPVT': PCPVT, 'SVT': SVT}
ARCHS = [(name, arch) for name in MODELS for arch in ('s', 'b', 'l')]
# Papers' parameter counts, with the 1000-class classifier.
OFFICIAL_PARAMS = {
    ('PCPVT', 's'): 24.1e6,
    ('PCPVT', 'b'): 43.8e6,
    ('PCPVT', 'l'): 60.9e6,
    ('SVT', 's'): 24.0e6,
    ('SVT', 'b'): 56.1e6,
    ('SVT', 'l'): 99.2e6,
}


@functools.lru_cache(maxsize=None)
def shared_model(name, arch):
    """One model per arch, built once (the large ones are slow to build);
    tests that use it restore what they change."""
    return MODELS[name](
        arch=arch, out_indices=(0, 1, 2, 3), out_type='featmap',
        drop_path_rate=0.1)


def count_params(module):
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize('name,arch', ARCHS)
def test_param_count_matches_paper(name, arch):
    model = shared_model(name, arch)
    total = count_params(model) + model.embed_dims[-1] * 1000 + 1000
    expected = OFFICIAL_PARAMS[(name, arch)]
    assert abs(total - expected) / expected < 0.005, total


# 'b' and 'l' differ from 's' in widths, heads and depths only
# (test_param_count_matches_paper builds them).
@pytest.mark.parametrize('name', MODELS)
def test_featmaps_at_odd_size_and_backward(name):
    model = shared_model(name, 's').train()
    model.zero_grad(set_to_none=True)
    outs = model(torch.randn(1, 3, 33, 61))
    # Strides 4, 8, 16, 32, rounding up (corner padding).
    expected = [(1, c, math.ceil(33 / s), math.ceil(61 / s))
                for c, s in zip(model.embed_dims, (4, 8, 16, 32))]
    assert [tuple(o.shape) for o in outs] == expected
    sum(o.mean() for o in outs).backward()
    no_grad = [
        n for n, p in model.named_parameters()
        if p.requires_grad and p.grad is None
    ]
    assert not no_grad, f'parameters without gradient: {no_grad}'
    model.zero_grad(set_to_none=True)
    model.eval()


@pytest.mark.parametrize('name', MODELS)
@pytest.mark.parametrize('size', [(29, 29), (225, 319), (64, 37)])
def test_odd_input_sizes(name, size):
    model = shared_model(name, 's')
    with torch.no_grad():
        outs = model(torch.randn(1, 3, *size))
    assert [o.shape[-2:] for o in outs] == [
        torch.Size(grid.hw) for grid in model.token_grids(*size)
    ]
    assert all(torch.isfinite(o).all() for o in outs)


@pytest.mark.parametrize('cls', [PCPVT, SVT])
def test_classification_output_is_pooled_final_norm(cls):
    arch = TINY_SVT if cls is SVT else TINY
    torch.manual_seed(0)
    pooled = cls(arch=arch).eval()
    dense = cls(arch=arch, out_indices=-1, out_type='featmap').eval()
    dense.load_state_dict(pooled.state_dict())
    x = torch.randn(2, 3, 64, 48)
    with torch.no_grad():
        (feat, ), (fmap, ) = pooled(x), dense(x)
    assert feat.shape == (2, 32)
    torch.testing.assert_close(feat, fmap.mean(dim=(2, 3)))
    # The official model: only the last stage ends with a norm.
    assert isinstance(pooled.stages[3].norm, torch.nn.LayerNorm)
    assert not any(
        isinstance(stage.norm, torch.nn.LayerNorm)
        for stage in pooled.stages[:3])


def test_out_indices_and_norm_after_stage():
    model = SVT(arch=TINY_SVT, out_indices=(-1, 1), out_type='featmap',
                norm_after_stage=True)
    assert model.out_indices == (1, 3)
    assert all(isinstance(s.norm, torch.nn.LayerNorm) for s in model.stages)
    outs = model(torch.randn(1, 3, 64, 64))
    assert [o.shape[1] for o in outs] == [16, 32]
    model = PCPVT(arch=TINY, out_indices=0, norm_after_stage=False)
    assert model(torch.randn(1, 3, 64, 64))[0].shape == (1, 8)
    assert not any(n.startswith('stages.3.norm')
                   for n, _ in model.named_parameters())


def layer_norm_eps(model):
    return {
        n: m.eps
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.LayerNorm)
    }


def test_norm_eps_is_configurable():
    eps = layer_norm_eps(PCPVT(arch=TINY))
    # The official values.
    assert eps['stages.0.blocks.0.norm1'] == 1e-6
    assert eps['stages.3.norm'] == 1e-6
    assert eps['stages.0.patch_embed.norm'] == 1e-5
    assert eps['stages.0.blocks.0.attn.sr_norm'] == 1e-5
    eps = layer_norm_eps(
        PCPVT(
            arch=TINY,
            norm_cfg=dict(type='LN', eps=1e-5),
            patch_norm_cfg=dict(type='LN', eps=1e-4),
            sr_norm_cfg=dict(type='LN', eps=1e-3)))
    assert eps['stages.1.blocks.0.norm2'] == 1e-5
    assert eps['stages.3.norm'] == 1e-5
    assert eps['stages.1.patch_embed.norm'] == 1e-4
    assert eps['stages.1.blocks.0.attn.sr_norm'] == 1e-3


def test_arch_aliases_and_registry():
    assert PCPVT(arch='Small').arch_settings == PCPVT.arch_zoo['s']
    model = ROOT_MODELS.build(dict(type='mmtnt.SVT', arch='base'))
    assert isinstance(model, SVT) and model.embed_dims[-1] == 768
    # SVT alternates LSA (even blocks) and GSA (odd blocks).
    blocks = model.stages[2].blocks
    assert isinstance(blocks[0].attn, LocallyGroupedAttention)
    assert isinstance(blocks[1].attn, SpatialReductionAttention)
    assert all(
        isinstance(b.attn, SpatialReductionAttention)
        for b in PCPVT(arch=TINY).stages[0].blocks)


def test_custom_arch_with_other_stage_count():
    arch = {key: values[:3] for key, values in TINY_SVT.items()}
    model = SVT(arch=arch, out_indices=(0, 1, 2), out_type='featmap')
    outs = model(torch.randn(1, 3, 50, 70))
    assert [tuple(o.shape) for o in outs] == [(1, 8, 13, 18), (1, 16, 7, 9),
                                              (1, 16, 4, 5)]


def test_errors_say_what_is_allowed():
    with pytest.raises(ValueError, match=r"Unknown PCPVT arch 'xl'.*'s'"):
        PCPVT(arch='xl')
    with pytest.raises(ValueError, match='exactly the keys.*window_sizes'):
        SVT(arch=TINY)
    with pytest.raises(ValueError, match=r'3 stages: every per-stage '
                       r'setting needs 3 values, got embed_dims=\[8'):
        PCPVT(arch=dict(TINY, depths=[1, 1, 1]))
    with pytest.raises(ValueError, match='divisible by num_heads'):
        PCPVT(arch=dict(TINY, num_heads=[3, 2, 2, 4]))
    with pytest.raises(ValueError, match=r'Invalid out index 4.*\[-4, 3\]'):
        PCPVT(arch='s', out_indices=(0, 4))
    with pytest.raises(ValueError, match='out_type'):
        SVT(arch=TINY_SVT, out_type='cls_token')
    with pytest.raises(ValueError, match=r'frozen_stages.*\[-1, 4\]'):
        SVT(arch=TINY_SVT, frozen_stages=5)
    with pytest.raises(ValueError,
                       match=r'4 values, got norm_after_stage=\[True\]'):
        PCPVT(arch=TINY, norm_after_stage=[True])
    model = PCPVT(arch='s')
    assert model.min_input_size == 29
    with pytest.raises(ValueError, match=r'28x64 pixels is too small.*'
                       r'stage 0 gets a 7x16 token grid.*sr_ratio=8.*29x29'):
        model(torch.randn(1, 3, 28, 64))
    with pytest.raises(ValueError, match=r'\(B, C, H, W\)'):
        model(torch.randn(3, 64, 64))


@pytest.mark.parametrize('frozen_stages', [0, 2, 4])
def test_frozen_stages(frozen_stages):
    model = SVT(arch=TINY_SVT, frozen_stages=frozen_stages, drop_rate=0.5)
    model.train()
    if frozen_stages == 0:
        frozen = ('stages.0.patch_embed.', )
    else:
        frozen = tuple(f'stages.{i}.' for i in range(frozen_stages))
    for name, param in model.named_parameters():
        assert param.requires_grad != name.startswith(frozen), name
    for name, module in model.named_modules():
        if f'{name}.'.startswith(frozen):
            assert not module.training, name
        elif name and not frozen[0].startswith(f'{name}.'):
            assert module.training, name
    out = model(torch.randn(1, 3, 64, 64))[0]
    assert out.requires_grad == (frozen_stages < 4)


def test_init_weights_is_the_official_one():
    model = PCPVT(arch=TINY)
    model.init_weights()
    peg = model.stages[3].pos_conv.proj
    # normal(0, sqrt(2 / fan_out)) with fan_out = 3*3*C/groups = 9.
    assert abs(peg.weight.std().item() - math.sqrt(2 / 9)) < 0.15
    assert (peg.bias == 0).all()
    fc1 = model.stages[3].blocks[0].mlp.fc1
    assert abs(fc1.weight.std().item() - 0.02) < 0.003
    assert (fc1.bias == 0).all()


def test_foreign_checkpoint_is_refused():
    model = PCPVT(arch=TINY)
    for key in ('patch_embeds.0.proj.weight', 'stages.0.0.norm1.weight',
                'layers.0.0.norm1.weight'):
        with pytest.raises(ValueError, match='twins2mmtnt.py'):
            model.load_state_dict({key: torch.zeros(1)}, strict=False)
    # mmtnt's own keys load.
    model.load_state_dict(PCPVT(arch=TINY).state_dict())


def window_reference(attn, x, hw_shape):
    """LSA computed window by window on the real tokens only, with the
    module's weights: what padding and masking must reproduce."""
    H, W = hw_shape
    ws, heads = attn.window_size, attn.num_heads
    B, _, C = x.shape
    grid = x.view(B, H, W, C)
    out = torch.empty_like(grid)
    for top in range(0, H, ws):
        for left in range(0, W, ws):
            window = grid[:, top:top + ws, left:left + ws]
            h, w = window.shape[1:3]
            tokens = window.reshape(B, h * w, C)
            q, k, v = attn.qkv(tokens).view(B, h * w, 3, heads,
                                            -1).permute(2, 0, 3, 1, 4)
            weights = (q @ k.transpose(-2, -1) * q.shape[-1]**-0.5).softmax(-1)
            res = (weights @ v).transpose(1, 2).reshape(B, h * w, C)
            out[:, top:top + h, left:left + w] = attn.proj(res).view(
                B, h, w, C)
    return out.view(B, H * W, C)


@pytest.mark.parametrize(
    'hw_shape',
    [
        (8, 12),  # no padding
        (8, 10),  # right only
        (6, 12),  # bottom only
        (7, 10),  # both
        (3, 2),  # smaller than one window
        (1, 9),
    ])
def test_lsa_padding_never_reaches_real_tokens(hw_shape):
    torch.manual_seed(0)
    attn = LocallyGroupedAttention(24, num_heads=3, window_size=4).eval()
    x = torch.randn(2, hw_shape[0] * hw_shape[1], 24)
    with torch.no_grad():
        actual = attn(x, hw_shape)
        expected = window_reference(attn, x, hw_shape)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_lsa_padding_mask_layout():
    mask = LocallyGroupedAttention.padding_mask((5, 3), 4)
    # 2x1 windows of 4x4: the first has 4 real rows, the second 1, each
    # with 3 real columns.
    assert mask.shape == (2, 1, 1, 16)
    first = mask[0, 0, 0].view(4, 4)
    second = mask[1, 0, 0].view(4, 4)
    assert first[:, :3].all() and not first[:, 3].any()
    assert second[0, :3].all() and not second[1:].any()


def test_gsa_at_odd_sizes_matches_direct_computation():
    torch.manual_seed(0)
    attn = SpatialReductionAttention(16, num_heads=2, sr_ratio=4).eval()
    H, W = 11, 14
    x = torch.randn(2, H * W, 16)
    with torch.no_grad():
        actual = attn(x, (H, W))
        fmap = x.transpose(1, 2).reshape(2, 16, H, W)
        # The reduction sees the top-left 8x12 pixels (floor, as a strided
        # convolution).
        reduced = F.conv2d(fmap[:, :, :8, :12], attn.sr.weight, attn.sr.bias,
                           stride=4).flatten(2).transpose(1, 2)
        kv = attn.kv(attn.sr_norm(reduced)).view(2, 6, 2, 2, 8)
        k, v = kv.permute(2, 0, 3, 1, 4)
        q = attn.q(x).view(2, H * W, 2, 8).transpose(1, 2)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(8)).softmax(-1)
        expected = attn.proj((weights @ v).transpose(1, 2).reshape(
            2, H * W, 16))
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
