"""Contract tests of mmtnt.PyramidTNT over every arch, size and output."""
import math

import pytest
import torch
import torch.nn as nn
from mmengine.registry import MODELS as ROOT_MODELS
from tiny_backbones import PYRAMID_TNT_TINY as TINY

from mmtnt.models import PyramidTNT

ARCHS = ['ti', 's', 'm', 'b']
# Published parameter counts (official code: every parameter, position terms
# at the training size and the 1000-class classifier included).
OFFICIAL_PARAMS = {'ti': 10.58e6, 's': 31.95e6, 'm': 84.94e6, 'b': 156.99e6}
# Sizes from classification (192-320) to segmentation and detection crops.
SIZES = [(192, 192), (224, 224), (256, 256), (320, 320), (512, 512),
         (800, 1216)]


def count_params(module):
    return sum(p.numel() for p in module.parameters())


def expected_shapes(model, batch, height, width):
    return [(batch, grid.channels, math.ceil(height / grid.stride),
             math.ceil(width / grid.stride))
            for grid in model.token_grids(height, width)]


def params_without_grad(model):
    return [
        n for n, p in model.named_parameters()
        if p.requires_grad and p.grad is None
    ]


@pytest.mark.parametrize('arch', ARCHS)
def test_every_arch_is_the_official_one(arch):
    """Each arch has the official parameter count and training size, and
    gives a map of its channels at each stride (the shapes and padding of
    other sizes do not depend on the arch: the tiny one checks them)."""
    model = PyramidTNT(arch=arch, out_indices=(0, 1, 2, 3),
                       out_type='featmap').eval()
    total = count_params(model) + model.embed_dims * 1000 + 1000
    expected = OFFICIAL_PARAMS[arch]
    assert abs(total - expected) / expected < 0.005, total
    assert model.img_size == ((192, 192) if arch == 'ti' else (256, 256))
    grids = model.token_grids(64, 96)
    assert [grid.stride for grid in grids] == [8, 16, 32, 64]
    assert [grid.channels for grid in grids] == list(
        model.arch_settings['outer_dims'])
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 64, 96))
    assert [o.shape for o in outs] == expected_shapes(model, 1, 64, 96)


# Stage 0 has a block without the inner layer, stage 1 more than 6 blocks
# (the inner layer in blocks 0 and 1), as in the released archs.
@pytest.mark.parametrize('upsample', [False, True])
def test_backward_reaches_every_parameter(upsample):
    model = PyramidTNT(
        arch=dict(TINY, depths=[2, 7, 1, 1]),
        out_indices=(0, 1, 2, 3),
        out_type='featmap',
        upsample_featmaps=upsample,
        drop_path_rate=0.1)
    assert [grid.stride for grid in model.token_grids(64, 96)] == (
        [4, 8, 16, 32] if upsample else [8, 16, 32, 64])
    outs = model(torch.randn(2, 3, 64, 96))
    assert [o.shape for o in outs] == expected_shapes(model, 2, 64, 96)
    sum(o.sum() for o in outs).backward()
    assert not params_without_grad(model)


@pytest.mark.parametrize('size', SIZES)
def test_every_size_native_strides(size):
    model = PyramidTNT(arch=TINY, out_indices=(0, 1, 2, 3),
                       out_type='featmap').eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, *size))
    assert [o.shape for o in outs] == expected_shapes(model, 1, *size)
    assert all(torch.isfinite(o).all() for o in outs)


@pytest.mark.parametrize('size', [(224, 224), (200, 328), (800, 1216)])
def test_detection_strides(size):
    model = PyramidTNT(arch=TINY, out_indices=(0, 1, 2, 3),
                       out_type='featmap', upsample_featmaps=True).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, *size))
    assert [o.shape for o in outs] == expected_shapes(model, 1, *size)
    # The usual pyramid: every level is the previous one halved (rounded
    # up), from a quarter of the input.
    assert outs[0].shape[2:] == (math.ceil(size[0] / 4),
                                 math.ceil(size[1] / 4))
    for fine, coarse in zip(outs, outs[1:]):
        assert coarse.shape[2:] == tuple(
            math.ceil(side / 2) for side in fine.shape[2:])


def test_odd_sizes_equal_zero_padding_to_multiple_of_8():
    model = PyramidTNT(arch=TINY, img_size=64, out_indices=(0, 3),
                       out_type='featmap').eval()
    x = torch.randn(2, 3, 61, 90)
    padded = nn.functional.pad(x, (0, 6, 0, 3))
    with torch.no_grad():
        outs, ref = model(x), model(padded)
    assert [o.shape[2:] for o in outs] == [(8, 12), (1, 2)]
    for a, b in zip(outs, ref):
        torch.testing.assert_close(a, b)


def test_avg_featmap_is_mean_of_normed_featmap():
    torch.manual_seed(0)
    featmap = PyramidTNT(arch=TINY, out_indices=(1, 3),
                         out_type='featmap').eval()
    avg = PyramidTNT(arch=TINY, out_indices=(1, 3)).eval()
    avg.load_state_dict(featmap.state_dict())
    x = torch.randn(2, 3, 72, 48)
    with torch.no_grad():
        maps, pooled = featmap(x), avg(x)
    for m, p in zip(maps, pooled):
        torch.testing.assert_close(m.mean(dim=(2, 3)), p)


def test_arch_aliases_and_registry():
    for short, long in [('ti', 'Tiny'), ('s', 'small'), ('m', 'MEDIUM'),
                        ('b', 'base')]:
        assert PyramidTNT.arch_zoo[short] == PyramidTNT.arch_zoo[
            long.lower()]
    model = ROOT_MODELS.build(dict(type='mmtnt.PyramidTNT', arch='tiny'))
    assert isinstance(model, PyramidTNT) and model.embed_dims == 320
    assert model.img_size == (192, 192)


def test_custom_arch_and_sr_ratios():
    model = PyramidTNT(arch=TINY, img_size=(64, 96), sr_ratios=(2, 2, 1, 1),
                       out_indices=-1, out_type='featmap')
    assert model.stages[0].relative_pos.shape == (1, 2, 8 * 12, 4 * 6)
    assert model(torch.randn(1, 3, 64, 96))[0].shape == (1, 32, 1, 2)


def test_inner_layer_only_where_official_runs_it():
    model = PyramidTNT(arch=dict(TINY, depths=[2, 10, 6, 2]))  # 'b' depths
    with_inner = [[block.has_inner for block in stage.blocks]
                  for stage in model.stages]
    assert with_inner == [[True, False], [True, True] + [False] * 8,
                          [True] + [False] * 5, [True, False]]
    assert not hasattr(model.stages[1].blocks[2], 'inner')


def test_errors_say_what_is_allowed():
    with pytest.raises(ValueError, match=r"Unknown PyramidTNT arch 'xl'.*"
                       r"'ti'"):
        PyramidTNT(arch='xl')
    with pytest.raises(ValueError, match='exactly the keys'):
        PyramidTNT(arch=dict(depths=[1, 1, 1, 1]))
    with pytest.raises(ValueError, match='4 stages'):
        PyramidTNT(arch={**TINY, 'depths': [1, 1, 1]})
    with pytest.raises(ValueError, match='divisible by num_heads_outer'):
        PyramidTNT(arch={**TINY, 'num_heads_outer': [3, 2, 4, 4]})
    with pytest.raises(ValueError, match=r'Invalid out index 4.*\[-4, 3\]'):
        PyramidTNT(arch=TINY, out_indices=(0, 4))
    with pytest.raises(ValueError, match='out_type'):
        PyramidTNT(arch=TINY, out_type='cls_token')
    with pytest.raises(ValueError, match='upsample_featmaps'):
        PyramidTNT(arch=TINY, upsample_featmaps=True)
    with pytest.raises(ValueError, match=r'frozen_stages.*\[-1, 4\]'):
        PyramidTNT(arch=TINY, frozen_stages=5)
    model = PyramidTNT(arch=TINY, img_size=64)
    with pytest.raises(ValueError, match=r'24x64 pixels is too small.*'
                       r'stage 0 gets a 3x8 token grid.*at least 25x25'):
        model(torch.randn(1, 3, 24, 64))
    model(torch.randn(1, 3, 25, 25))  # the smallest input
    with pytest.raises(ValueError, match=r'img_size of at least 25.*'
                       r'got \(16, 16\)'):
        PyramidTNT(arch=TINY, img_size=16)


def test_foreign_checkpoint_is_refused():
    model = PyramidTNT(arch=TINY, img_size=64)
    with pytest.raises(ValueError, match='pyramid_tnt2mmtnt.py'):
        model.load_state_dict({'outer_pos': torch.zeros(1, 64, 16)},
                              strict=False)


@pytest.mark.parametrize('frozen_stages', [0, 2, 4])
def test_frozen_stages(frozen_stages):
    model = PyramidTNT(arch=TINY, frozen_stages=frozen_stages, drop_rate=0.5,
                       out_indices=(0, 1, 2, 3), out_type='featmap')
    model.train()
    frozen = ['stem.', 'word_pos', 'sentence_pos']
    frozen += [f'stages.{i}.' for i in range(frozen_stages)]
    if frozen_stages == 4:
        frozen.append('norm.')
    for name, param in model.named_parameters():
        assert param.requires_grad != name.startswith(tuple(frozen)), name
    assert not model.stem.training and not model.pos_drop.training
    assert not model.stem.shared.norm.training  # BatchNorm statistics kept
    for i, stage in enumerate(model.stages):
        assert stage.training == (i >= frozen_stages)
    outs = model(torch.randn(1, 3, 64, 64))
    assert [o.requires_grad for o in outs] == [
        i >= frozen_stages for i in range(4)
    ]


def test_norm_eval_keeps_batchnorm_statistics():
    model = PyramidTNT(arch=TINY, norm_eval=True, out_type='featmap',
                       upsample_featmaps=True)
    model.train()
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(bns) == 5 + 2  # stem and the upsampling of the output
    assert not any(bn.training for bn in bns)
    assert model.stages[0].training
    before = [bn.running_mean.clone() for bn in bns]
    model(torch.randn(2, 3, 64, 64))
    for bn, mean in zip(bns, before):
        torch.testing.assert_close(bn.running_mean, mean)


def test_position_terms_follow_the_input_grid():
    model = PyramidTNT(arch=TINY, img_size=64, out_indices=(0, 1, 2, 3),
                       out_type='featmap').eval()
    # Stored for img_size: 8x8 sentences, keys pooled by 4, 2, 1, 1.
    assert [tuple(s.relative_pos.shape[2:]) for s in model.stages] == [
        (64, 4), (16, 4), (4, 4), (1, 1)
    ]
    stage = model.stages[0]
    assert stage.attention_bias((8, 8)) is stage.relative_pos
    assert stage.attention_bias((13, 7)).shape == (1, 2, 13 * 7, 3 * 1)
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 104, 56))
    assert [o.shape[2:] for o in outs] == [(13, 7), (7, 4), (4, 2), (2, 1)]


def test_checkpoint_from_another_size_loads():
    torch.manual_seed(0)
    source = PyramidTNT(arch=TINY, img_size=64).eval()
    target = PyramidTNT(arch=TINY, img_size=(96, 128)).eval()
    target.load_state_dict(source.state_dict())
    assert target.sentence_pos.shape == (1, 12 * 16, 16)
    assert target.stages[0].relative_pos.shape == (1, 2, 12 * 16, 3 * 4)
    assert target.stages[3].relative_pos.shape == (1, 2, 2 * 2, 2 * 2)
    # Resizing at load time and at run time agree.
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        torch.testing.assert_close(target(x)[0], source(x)[0])


def test_non_square_checkpoint_of_another_size_is_refused():
    source = PyramidTNT(arch=TINY, img_size=(64, 96))
    target = PyramidTNT(arch=TINY, img_size=64)
    with pytest.raises(ValueError, match='not a square grid'):
        target.load_state_dict(source.state_dict())


def test_init_weights():
    model = PyramidTNT(arch=TINY, out_type='featmap', upsample_featmaps=True)
    model.init_weights()
    conv = model.stem.sentence_branch[2].conv
    fan_out = conv.out_channels * 9
    assert abs(conv.weight.std().item() - math.sqrt(2 / fan_out)) < 0.02
    assert model.stages[0].blocks[0].outer.norm1.weight.eq(1).all()
