"""What the three families share through the base backbone: only the
stages an output needs are built, ``with_cp`` can be switched after
building, and checkpoints of an earlier key layout still load."""
import re

import pytest
import torch
from tiny_backbones import TINY_BACKBONES as FAMILIES


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
def test_with_cp_can_be_switched_after_building(name):
    torch.manual_seed(0)
    model = FAMILIES[name](out_type='featmap').train()
    x = torch.randn(2, 3, 64, 96)

    def grads():
        model.zero_grad(set_to_none=True)
        sum(out.square().mean() for out in model(x)).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    plain = grads()
    model.with_cp = True
    recomputed = grads()
    for key, grad in plain.items():
        torch.testing.assert_close(recomputed[key], grad, msg=key)


def test_pyramid_tnt_loads_checkpoints_of_the_earlier_block_layout():
    """Before the sentence transformer was a block of its own, its keys
    were ``blocks.j.{norm1, attn, norm2, mlp}``: they load as
    ``blocks.j.outer.*``."""
    model = FAMILIES['PyramidTNT']()
    earlier = {
        re.sub(r'(blocks\.\d+\.)outer\.', r'\1', key): value + 1
        for key, value in model.state_dict().items()
    }
    assert 'stages.0.blocks.0.attn.q.weight' in earlier
    loaded = FAMILIES['PyramidTNT']()
    loaded.load_state_dict(earlier)
    torch.testing.assert_close(loaded.stages[0].blocks[0].outer.attn.q.weight,
                               model.stages[0].blocks[0].outer.attn.q.weight +
                               1)
