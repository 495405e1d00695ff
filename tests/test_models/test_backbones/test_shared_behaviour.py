"""What the three families share through the base backbone: one geometry
contract (token grids, the smallest input, padding), only the stages an
output needs are built, ``with_cp`` and drop path."""
import pytest
import torch
from tiny_backbones import TINY_BACKBONES as FAMILIES
from tiny_backbones import TWINS_TINY

from mmtnt.models import PCPVT, SVT, TNT, PyramidTNT
from mmtnt.models.backbones import base_backbone
from mmtnt.models.utils import pad_to_multiple

# Sizes that are multiples of every stride, and sides that are not.
SIZES = [(64, 96), (61, 90), (33, 47)]
FULL_SIZE = {
    'TNT': lambda **kw: TNT(arch='s', **kw),
    'PyramidTNT': lambda **kw: PyramidTNT(arch='s', **kw),
    'PCPVT': lambda **kw: PCPVT(arch='s', **kw),
    'SVT': lambda **kw: SVT(arch='s', **kw),
}


def all_outputs(name):
    return dict(out_indices=(0, 1) if name == 'TNT' else (0, 1, 2, 3),
                out_type='featmap')


@pytest.mark.parametrize('size', SIZES)
@pytest.mark.parametrize('name', list(FAMILIES))
def test_token_grids_describe_the_outputs(name, size):
    """Each output's map has the declared grid and channels, its grid is
    the input over the declared stride rounded up, and its tokens are the
    stage's."""
    model = FAMILIES[name](**all_outputs(name)).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, *size))
    grids = model.token_grids(*size)
    assert len(grids) == len(outs)
    for out, grid in zip(outs, grids):
        assert out.shape[1:] == (grid.channels, *grid.hw)
        assert grid.hw == tuple(-(-side // grid.stride) for side in size)
    stages = model.stage_token_grids(*size)
    assert [stages[i] for i in model.out_indices] == grids


def test_upsampled_pyramid_tnt_grids_are_its_maps():
    model = FAMILIES['PyramidTNT'](upsample_featmaps=True,
                                   **all_outputs('PyramidTNT')).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 61, 90))
    grids = model.token_grids(61, 90)
    assert [g.stride for g in grids] == [4, 8, 16, 32]
    assert [out.shape[2:] for out in outs] == [g.hw for g in grids]


@pytest.mark.parametrize('name', list(FULL_SIZE))
def test_min_input_size_is_the_smallest_that_runs(name):
    """The declared smallest input runs; one pixel less, in either side,
    is refused with a message that gives the smallest."""
    model = FULL_SIZE[name](**all_outputs(name)).eval()
    side = model.min_input_size
    with torch.no_grad():
        model(torch.randn(1, 3, side, side))
        if side == 1:
            return
        for size in ((side - 1, side), (side, side - 1)):
            with pytest.raises(ValueError,
                               match=rf'too small.*at least {side}x{side}'):
                model(torch.randn(1, 3, *size))


def test_min_input_size_counts_the_built_stages_only():
    """Stage 3 reduces by 2 at stride 32 (at least 33 pixels); a model cut
    after stage 0 does not build it, and takes any input."""
    arch = dict(TWINS_TINY, sr_ratios=[1, 1, 1, 2])
    assert PCPVT(arch=arch).min_input_size == 33
    model = PCPVT(arch=arch, out_indices=0)
    assert model.min_input_size == 1
    assert model(torch.randn(1, 3, 1, 1))[0].shape == (1, 8)
    assert PCPVT(arch='s').min_input_size == 29  # stage 0: 8x8 at stride 4
    assert PyramidTNT(arch='s').min_input_size == 25
    assert TNT(arch='s').min_input_size == 1


def test_pad_to_multiple_pads_the_end_of_the_given_dims():
    x = torch.arange(6.).reshape(1, 1, 2, 3)
    padded = pad_to_multiple(x, 4)
    assert padded.shape == (1, 1, 4, 4)
    torch.testing.assert_close(padded[..., :2, :3], x)
    assert padded[..., 2:, :].abs().sum() == 0
    assert padded[..., 3].abs().sum() == 0
    assert pad_to_multiple(x, 1) is x
    tokens = torch.ones(2, 5, 7, 3)  # (B, H, W, C)
    assert pad_to_multiple(tokens, 2, dims=(1, 2)).shape == (2, 6, 8, 3)


@pytest.mark.parametrize('name', list(FAMILIES))
def test_early_out_indices_leave_no_parameter_without_gradient(name):
    """What DDP needs: an output before the last stage builds no stage
    after it, so every parameter gets a gradient."""
    model = FAMILIES[name](out_indices=0, out_type='featmap').train()
    full = FAMILIES[name](out_type='featmap')
    assert sum(p.numel() for p in model.parameters()) < sum(
        p.numel() for p in full.parameters())
    outs = model(torch.randn(2, 3, 64, 96))
    sum(out.mean() for out in outs).backward()
    without = [n for n, p in model.named_parameters() if p.grad is None]
    assert not without, without


@pytest.mark.parametrize('name', list(FAMILIES))
def test_with_cp_recomputes_every_block_and_keeps_the_gradients(
        name, monkeypatch):
    """``with_cp``, given to the constructor or switched on after
    building, checkpoints each block while training, and the gradients are
    those of the plain model."""
    assert FAMILIES[name](with_cp=True).with_cp
    torch.manual_seed(0)
    model = FAMILIES[name](out_type='featmap').train()
    x = torch.randn(2, 3, 64, 96)
    checkpointed = []
    original = base_backbone.cp.checkpoint

    def checkpoint(block, *args, **kwargs):
        checkpointed.append(block)
        return original(block, *args, **kwargs)

    monkeypatch.setattr(base_backbone.cp, 'checkpoint', checkpoint)

    def grads():
        model.zero_grad(set_to_none=True)
        sum(out.square().mean() for out in model(x)).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    num_blocks = model.num_blocks
    plain = grads()
    assert not checkpointed
    model.with_cp = True
    recomputed = grads()
    assert len(checkpointed) == num_blocks
    for key, grad in plain.items():
        torch.testing.assert_close(recomputed[key], grad, msg=key)


@pytest.mark.parametrize('name', list(FAMILIES))
def test_drop_path_is_stochastic_in_training_only(name):
    model = FAMILIES[name](drop_path_rate=0.5).train()
    x = torch.randn(2, 3, 64, 64)
    torch.manual_seed(0)
    assert not torch.allclose(model(x)[-1], model(x)[-1])
    model.eval()
    torch.testing.assert_close(model(x)[-1], model(x)[-1])
