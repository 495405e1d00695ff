"""mmtnt.FeaturePyramid: TNT's stride-16 maps as a pyramid for dense heads."""
import pytest
import torch
from mmengine.registry import MODELS, init_default_scope
from tiny_backbones import TNT_TINY

from mmtnt.models import TNT, FeaturePyramid

def maps(count, channels=16, size=(6, 10)):
    generator = torch.Generator().manual_seed(0)
    return tuple(
        torch.randn(2, channels, *size, generator=generator)
        for _ in range(count))


@pytest.mark.parametrize('size', [(6, 10), (7, 9)])
def test_levels_have_the_declared_strides(size):
    neck = FeaturePyramid(16, scales=(4, 2, 1, 0.5, 0.25))
    outs = neck(maps(5, size=size))
    h, w = size
    expected = [(4 * h, 4 * w), (2 * h, 2 * w), (h, w),
                (-(-h // 2), -(-w // 2)), (-(-h // 4), -(-w // 4))]
    assert [tuple(out.shape[-2:]) for out in outs] == expected
    assert all(out.shape[:2] == (2, 16) for out in outs)


def test_each_level_rescales_its_own_input():
    neck = FeaturePyramid(16).eval()
    inputs = maps(4)
    outs = neck(inputs)
    # scale 1 passes its map through; scale 0.5 is a 2x2 max pooling
    assert torch.equal(outs[2], inputs[2])
    assert torch.equal(outs[3], inputs[3].unflatten(2, (3, 2)).unflatten(
        4, (5, 2)).amax(dim=(3, 5)))
    # a single input feeds every level
    shared = neck(inputs[:1])
    assert torch.equal(shared[0], outs[0])
    assert torch.equal(shared[2], inputs[0])
    assert torch.equal(shared[3], torch.max_pool2d(inputs[0], 2))
    assert not torch.equal(shared[3], outs[3])


def test_gradients_reach_every_upsampling_weight():
    neck = FeaturePyramid(16)
    inputs = tuple(x.requires_grad_() for x in maps(4))
    sum(out.square().mean() for out in neck(inputs)).backward()
    for name, param in neck.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    assert all(x.grad is not None for x in inputs)


@pytest.mark.parametrize('scales', [(3, 1), (4, 0), (-2, )])
def test_rejects_scales_that_are_not_powers_of_two(scales):
    with pytest.raises(ValueError, match='powers of two'):
        FeaturePyramid(16, scales=scales)


def test_rejects_a_wrong_number_of_maps():
    with pytest.raises(ValueError, match='takes 1 or 4 maps, got 2'):
        FeaturePyramid(16)(maps(2))


def test_rejects_maps_with_other_channels_or_tokens():
    neck = FeaturePyramid(32)
    with pytest.raises(ValueError, match='with 32 channels, got shape'):
        neck(maps(4))
    with pytest.raises(ValueError, match="out_type='featmap'"):
        neck((torch.rand(2, 32), ))


@pytest.mark.parametrize('scope', ['mmdet', 'mmseg'])
def test_tnt_feeds_an_fpn_through_the_pyramid(scope):
    """A neck given as a list is built as nn.Sequential by mmengine: the
    pyramid then the library's FPN, as the TNT dense configs use it."""
    init_default_scope(scope)
    neck = MODELS.build([
        dict(type='mmtnt.FeaturePyramid', in_channels=16),
        dict(type='FPN', in_channels=[16] * 4, out_channels=8, num_outs=5)
    ])
    # four blocks, one map each
    backbone = TNT(
        arch=dict(TNT_TINY, num_layers=4),
        img_size=64,
        out_indices=(0, 1, 2, 3),
        out_type='featmap').eval()
    with torch.no_grad():
        outs = neck(backbone(torch.rand(1, 3, 64, 128)))
    assert [tuple(out.shape) for out in outs] == [(1, 8, 16 // s, 32 // s)
                                                  for s in (1, 2, 4, 8, 16)]
