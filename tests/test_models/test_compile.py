"""``torch.compile`` of a train step of every backbone.

Each backbone, in a tiny arch, is compiled with ``fullgraph=True`` (a graph
break fails the test) inside a module that pools its last stage and computes
a loss. Compiled by inductor, one forward and backward pass must give the
loss, gradients and updated buffers of the eager model in float64 (the exact
values, which the eager fp32 pass must give too), and reach every parameter.
Compiled for any input height and width, as ``torch.compile`` recompiles at
a second input size, four sizes (windows and patch grids that divide the
maps and not) must run on one graph.
"""
import copy

import pytest
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F
from tiny_backbones import SVT_TINY, TINY_BACKBONES, TNT_TINY, TWINS_TINY
from torch._dynamo.testing import CompileCounterWithBackend

from mmtnt.models import PCPVT, SVT, TNT

# Tiny archs cut to two stages (TNT to one block): inductor compiles each
# fused kernel with the C++ compiler (about a second each), so the fewer
# kernels the better; only the operators matter here. Every kind of block
# is in: TNT's inner and outer transformers; PyramidTNT's stem (with batch
# norm), word and sentence aggregations, pooled attention and its bias; the
# twins' stage 0 has a sub-sampled GSA block, PCPVT's stage 1 a plain one,
# and SVT's LSA blocks in both stages pad and mask their maps for the 3x3
# windows or not, by the size (SIZES).
BACKBONES = {
    'TNT': lambda: TNT(arch=dict(TNT_TINY, num_layers=1), img_size=64,
                       out_type='avg_featmap'),
    # img_size 128: inductor of torch 2.13 fails to compile the backward of
    # resizing the last stage's attention bias from a 1x1 grid
    # (pytorch/pytorch#160391).
    'PyramidTNT': lambda: TINY_BACKBONES['PyramidTNT'](out_indices=1),
    'PCPVT': lambda: PCPVT(
        arch=dict(TWINS_TINY, sr_ratios=[4, 1, 1, 1]), out_indices=1),
    'SVT': lambda: SVT(
        arch=dict(SVT_TINY, depths=[2, 1, 1, 1]), out_indices=1),
}
# Input sizes, none the models' img_size (the position terms are resized).
# SVT's maps, 1/4 and 1/8 of them, against its 3x3 windows: widths 24 and
# 12 divide, 22 and 11 not, 17 and 9, 21 and 11 one of the two; heights 16
# and 8 not, 18 and 9 both, 21 and 11, 17 and 9 one. Every stage's grid,
# and PyramidTNT's pooled key grids, keep at least 2 tokens a side.
SIZES = [(64, 96), (72, 88), (84, 68), (68, 84)]
# Allowed difference, relative to the largest magnitude of a tensor: inductor
# fuses and reorders fp32 sums. The tiny PyramidTNT's gradients come closest
# to it; with PyTorch's default initialization instead of the models' own,
# some seeds make them so ill-conditioned that compiled and eager fp32
# differ by 1e-2.
RELATIVE_TOLERANCE = 1e-3
# The families inductor compiles here: PCPVT's blocks (GSA, plain attention)
# are SVT's odd blocks and TNT's attention, so only the tests of
# ``test_train_step_compiles_once_for_any_size`` trace it. Inductor's C++
# compile takes one to two minutes a family on 2 cores with a cold cache:
# these are ``long`` tests (``make test-long``); a graph break in any
# family still fails ``test_train_step_compiles_once_for_any_size``.
INDUCTOR_FAMILIES = ['TNT', 'PyramidTNT', 'SVT']


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


def train_step(model, forward, inputs, target):
    """Run one forward (``forward``: ``model``, or it compiled) and
    backward pass, the gradients reset first.

    Returns:
        tuple[Tensor, dict]: The loss and each parameter's gradient by name.
    """
    model.zero_grad(set_to_none=True)
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


def assert_step_matches(loss, grads, exact_loss, exact_grads, kind):
    """Assert a float32 step's loss and gradients equal the float64 ones
    and reach every parameter."""
    assert_close_to_scale(loss.double(), exact_loss, f'{kind} loss')
    missing = [n for n, g in grads.items() if g is None]
    assert not missing, f'{kind}: parameters without gradient: {missing}'
    for key, grad in exact_grads.items():
        assert_close_to_scale(grads[key].double(), grad, f'{kind} {key}')


@pytest.fixture
def fresh_dynamo():
    """Compile from scratch, and leave no compiled code for other tests."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.long
@pytest.mark.parametrize('name', INDUCTOR_FAMILIES)
def test_compiled_train_step_matches_eager(name, fresh_dynamo):
    torch.manual_seed(0)
    backbone = BACKBONES[name]()
    backbone.init_weights()  # as training starts
    eager = PooledLoss(backbone).train()
    compiled = copy.deepcopy(eager)
    exact = copy.deepcopy(eager).double()
    inputs = torch.randn(2, 3, *SIZES[0])
    target = torch.tensor([0, 3])

    exact_loss, exact_grads = train_step(exact, exact, inputs.double(),
                                         target)
    forward = torch.compile(compiled, fullgraph=True)
    for kind, model, run in (('eager', eager, eager),
                             ('compiled', compiled, forward)):
        assert_step_matches(*train_step(model, run, inputs, target),
                            exact_loss, exact_grads, kind)
    # Batch norm statistics (PyramidTNT's stem) are updated alike.
    for (key, buffer), (_, compiled_buffer) in zip(exact.named_buffers(),
                                                   compiled.named_buffers()):
        if buffer.is_floating_point():
            assert_close_to_scale(compiled_buffer.double(), buffer, key)


@pytest.mark.slow
@pytest.mark.parametrize('name', list(BACKBONES))
def test_train_step_compiles_once_for_any_size(name, fresh_dynamo):
    """The graph traced for a dynamic height and width (what
    ``torch.compile``'s default ``dynamic=None`` traces at the second
    size) holds for every size. Counted with ``aot_eager``: dynamo and the
    traced backward add the guards, inductor's C++ code takes minutes."""
    torch.manual_seed(0)
    model = PooledLoss(BACKBONES[name]()).train()
    counter = CompileCounterWithBackend('aot_eager')
    forward = torch.compile(model, backend=counter, fullgraph=True)
    for size in SIZES:
        inputs = torch.randn(2, 3, *size)
        torch._dynamo.mark_dynamic(inputs, (2, 3))
        train_step(model, forward, inputs, torch.tensor([0, 3]))
    assert counter.frame_count == 1, (
        f'{name} compiled {counter.frame_count} graphs for {len(SIZES)} '
        'sizes (TORCH_LOGS=recompiles says why)')
