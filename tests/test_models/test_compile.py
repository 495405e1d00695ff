"""``torch.compile`` (inductor) of a train step of every backbone.

Each backbone, in a tiny arch, is compiled with ``fullgraph=True`` (a graph
break fails the test) inside a module that pools its last stage and computes
a loss; one forward and backward pass must give the loss, gradients and
updated buffers of the eager model in float64 (the exact values, which the
eager fp32 pass must give too), and reach every parameter.
"""
import copy

import pytest
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F
from tiny_backbones import SVT_TINY, TINY_BACKBONES, TWINS_TINY

from mmtnt.models import PCPVT, SVT

# Tiny archs, the twins' cut after stage 1: inductor compiles each fused
# kernel with the C++ compiler (about a second each), so the fewer kernels
# the better; only the operators matter here. Every kind of block is in:
# the twins' stage 0 has a sub-sampled GSA block, PCPVT's stage 1 a plain
# one, and SVT's LSA blocks pad and mask the bottom of their 16x24 and 8x12
# maps for the 3x3 windows.
BACKBONES = {
    'TNT': lambda: TINY_BACKBONES['TNT'](out_type='avg_featmap'),
    # img_size 128: inductor of torch 2.13 fails to compile the backward of
    # resizing the last stage's attention bias from a 1x1 grid
    # (pytorch/pytorch#160391).
    'PyramidTNT': TINY_BACKBONES['PyramidTNT'],
    'PCPVT': lambda: PCPVT(
        arch=dict(TWINS_TINY, sr_ratios=[4, 1, 1, 1]), out_indices=1),
    'SVT': lambda: SVT(
        arch=dict(SVT_TINY, depths=[2, 1, 1, 1]), out_indices=1),
}
# Allowed difference, relative to the largest magnitude of a tensor: inductor
# fuses and reorders fp32 sums. The tiny PyramidTNT's gradients come closest
# to it; with PyTorch's default initialization instead of the models' own,
# some seeds make them so ill-conditioned that compiled and eager fp32
# differ by 1e-2.
RELATIVE_TOLERANCE = 1e-3


class PooledLoss(nn.Module):
    """Cross-entropy of the pooled last-stage features, read as logits.

    Args:
        backbone (nn.Module): A backbone whose last output is (B, C).
    """

    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone

    def forward(self, x, target):
        return F.cross_entropy(self.backbone(x)[-1], target)


def train_step(model, inputs, target, compile=False):
    """Run one forward and backward pass of ``model``, compiled or eager.

    Returns:
        tuple[Tensor, dict]: The loss and each parameter's gradient by name.
    """
    forward = torch.compile(model, fullgraph=True) if compile else model
    loss = forward(inputs, target)
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    return loss.detach(), grads


def assert_close_to_scale(actual, expected, name):
    """Assert ``actual`` equals ``expected`` up to ``RELATIVE_TOLERANCE``
    times the largest magnitude of ``expected`` (1e-7 if that is 0)."""
    atol = max(RELATIVE_TOLERANCE * float(expected.abs().max()), 1e-7)
    torch.testing.assert_close(
        actual, expected, rtol=0, atol=atol,
        msg=lambda message: f'{name}: {message}')


@pytest.fixture
def fresh_dynamo():
    """Compile from scratch, and leave no compiled code for other tests."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize('name', list(BACKBONES))
def test_compiled_train_step_matches_eager(name, fresh_dynamo):
    torch.manual_seed(0)
    backbone = BACKBONES[name]()
    backbone.init_weights()  # as training starts
    eager = PooledLoss(backbone).train()
    compiled = copy.deepcopy(eager)
    # Not the models' img_size: the position terms are resized.
    inputs = torch.randn(2, 3, 64, 96)
    target = torch.tensor([0, 3])

    exact = copy.deepcopy(eager).double()

    loss, grads = train_step(exact, inputs.double(), target)
    results = dict(
        eager=train_step(eager, inputs, target),
        compiled=train_step(compiled, inputs, target, compile=True))
    for kind, (fp32_loss, fp32_grads) in results.items():
        assert_close_to_scale(fp32_loss.double(), loss, f'{kind} loss')
        missing = [n for n, g in fp32_grads.items() if g is None]
        assert not missing, f'{kind}: parameters without gradient: {missing}'
        for key, grad in grads.items():
            assert_close_to_scale(fp32_grads[key].double(), grad,
                                  f'{kind} {key}')
    # Batch norm statistics (PyramidTNT's stem) are updated alike.
    for (key, buffer), (_, compiled_buffer) in zip(exact.named_buffers(),
                                                   compiled.named_buffers()):
        if buffer.is_floating_point():
            assert_close_to_scale(compiled_buffer.double(), buffer, key)
