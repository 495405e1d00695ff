"""Both routes of the CPU accelerator's attention compute PyTorch's fused
attention."""
import pytest
import torch
import torch.nn.functional as F

from mmtnt.accel.attention import (explicit_is_faster,
                                   scaled_dot_product_attention)


def qkv(num_keys, dtype=torch.float32, seed=0, num_queries=11):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(2, 3, num_queries, 8), (2, 3, num_keys, 8),
              (2, 3, num_keys, 5)]
    return [
        torch.randn(*s, generator=gen).to(dtype).requires_grad_()
        for s in shapes
    ]


@pytest.mark.parametrize('num_keys', [16, 49, 65])
@pytest.mark.parametrize('mask_type', [None, 'bool', 'bias'])
def test_same_values_and_gradients_as_fused_kernel(num_keys, mask_type):
    """Boolean masks and float biases (whose gradient is checked too)."""
    results = []
    for attention in (scaled_dot_product_attention,
                      F.scaled_dot_product_attention):
        q, k, v = qkv(num_keys)
        mask = None
        if mask_type == 'bool':
            mask = torch.arange(num_keys) < num_keys - 3
            mask = mask.view(1, 1, 1, num_keys).expand(2, 1, 1, num_keys)
        elif mask_type == 'bias':
            gen = torch.Generator().manual_seed(1)
            mask = torch.randn(1, 3, 11, num_keys,
                               generator=gen).requires_grad_()
        out = attention(q, k, v, attn_mask=mask)
        (out * torch.linspace(-1, 1, 5)).sum().backward()
        grads = [q.grad, k.grad, v.grad]
        if mask_type == 'bias':
            grads.append(mask.grad)
        results.append([out] + grads)
    for ours, fused in zip(*results):
        torch.testing.assert_close(ours, fused, rtol=1e-5, atol=1e-6)


def test_routes():
    """On the CPU, explicit products for low precision, a float bias, and
    float32 up to 64 keys in training; the fused kernel elsewhere (float32
    inference among it)."""
    q, k, _ = qkv(64)
    assert explicit_is_faster(q, k)
    q, k, _ = qkv(65)
    assert not explicit_is_faster(q, k)
    assert explicit_is_faster(q.bfloat16(), k.bfloat16())
    with torch.autocast('cpu', dtype=torch.bfloat16):
        assert explicit_is_faster(q, k)
    bias = torch.zeros(1, 3, 11, 65)
    assert explicit_is_faster(q, k, bias)
    assert not explicit_is_faster(q, k, bias > 0)
    q, k, _ = qkv(16, num_queries=16)
    assert explicit_is_faster(q, k)
    with torch.no_grad():
        assert not explicit_is_faster(q, k)
        assert not explicit_is_faster(q, k, bias > 0)
        assert explicit_is_faster(q, k, torch.zeros(1, 3, 16, 16))
        assert explicit_is_faster(q.bfloat16(), k.bfloat16())


def test_low_precision_route_matches_float32():
    q, k, v = qkv(49, torch.bfloat16)
    out = scaled_dot_product_attention(q, k, v)
    assert out.dtype == torch.bfloat16
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(out.float(), expected, rtol=0.02, atol=0.02)


def test_dropout_drops_weights_in_the_explicit_route():
    torch.manual_seed(0)
    q, k, v = qkv(16)
    v = torch.ones_like(v)
    # Every weight row sums to 1 without dropout; with p=0.5 the rows of
    # the kept weights, rescaled by 2, do not.
    out = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert not torch.allclose(out, torch.ones_like(out))
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v), torch.ones_like(out))


@pytest.mark.parametrize('num_keys', [16, 49])
def test_low_precision_without_autocast_keeps_the_dtype(num_keys):
    """Short rows take a float32 softmax; the output is still bfloat16 and
    its gradients reach the inputs."""
    q, k, v = qkv(num_keys, torch.bfloat16)
    out = scaled_dot_product_attention(q, k, v)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert q.grad.dtype == k.grad.dtype == v.grad.dtype == torch.bfloat16
