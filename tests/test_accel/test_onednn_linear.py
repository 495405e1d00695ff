"""The accelerator's linear layer computes torch's, on oneDNN for CPU
float32."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from mmtnt.accel.linear import OneDnnLinear as Linear
from mmtnt.accel.linear import linear, uses_onednn


def values_and_grads(forward, x, weight, bias):
    leaves = [t.detach().requires_grad_() for t in (x, weight, bias)
              if t is not None]
    out = forward(*leaves, *([None] * (3 - len(leaves))))
    (out * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
    return [out.detach()] + [t.grad for t in leaves]


@pytest.mark.parametrize('shape', [(7, 24), (2, 5, 24), (3, 0, 24)])
@pytest.mark.parametrize('bias', [True, False])
def test_same_values_and_gradients_as_torch(shape, bias):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=gen)
    weight = torch.randn(40, 24, generator=gen)
    b = torch.randn(40, generator=gen) if bias else None
    assert uses_onednn(x, weight)
    ours = values_and_grads(linear, x, weight, b)
    plain = values_and_grads(F.linear, x, weight, b)
    for a, expected in zip(ours, plain):
        torch.testing.assert_close(a, expected, rtol=1e-5, atol=1e-5)


def test_non_contiguous_input_and_frozen_weight():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(24, 9, generator=gen).t().requires_grad_()
    layer = Linear(24, 6).requires_grad_(False)
    out = layer(x)
    out.sum().backward()
    torch.testing.assert_close(out, F.linear(x, layer.weight, layer.bias))
    torch.testing.assert_close(x.grad, layer.weight.sum(0).expand(9, 24))
    assert layer.weight.grad is None


def test_plain_linear_elsewhere():
    x, weight = torch.randn(3, 4), torch.randn(5, 4)
    assert not uses_onednn(x.double(), weight.double())
    assert not uses_onednn(x.bfloat16(), weight.bfloat16())
    with torch.autocast('cpu', dtype=torch.bfloat16):
        assert not uses_onednn(x, weight)
        assert linear(x, weight).dtype == torch.bfloat16
    with torch.backends.mkldnn.flags(enabled=False):
        assert not uses_onednn(x, weight)
    traced = torch.jit.trace(Linear(4, 5), x)
    assert 'linear' in str(traced.graph)
    assert 'mkldnn' not in str(traced.graph)


def test_same_parameters_as_torch_linear():
    ours, plain = Linear(4, 5), nn.Linear(4, 5)
    assert isinstance(ours, nn.Linear)
    ours.load_state_dict(plain.state_dict())
    x = torch.randn(2, 4)
    torch.testing.assert_close(ours(x), plain(x))
