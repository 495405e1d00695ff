"""The plain model's attention route rule, and both routes against a
float64 reference in 16 bits."""
import pytest
import torch
import torch.nn.functional as F

from mmtnt.models import set_attention_impl
from mmtnt.models.layers import LocallyGroupedAttention
from mmtnt.models.layers.attention import (MAX_FUSED_BATCH, explicit_attention,
                                           scaled_dot_product_attention,
                                           takes_explicit_route)

UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
# Relative error (Frobenius norm) allowed against float64, in units of the
# dtype's roundoff: rounding the inputs alone costs about 0.5 u, and both
# routes measured 0.9-1.7 u on these shapes; a missing scale or a softmax
# over the wrong axis is off by tens of percent.
ROUNDOFFS_ALLOWED = 3


def tensors(*shapes, dtype=torch.float32):
    return [torch.empty(s, dtype=dtype) for s in shapes]


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_rule_takes_explicit_products_where_no_fused_kernel_fits(dtype):
    # TNT-S's inner attention: head dim 6 over 16 words.
    assert takes_explicit_route(*tensors((8, 4, 16, 6), (8, 4, 16, 6),
                                         (8, 4, 16, 6), dtype=dtype))
    # TNT-B's: head dim 10, and any head dim that is no multiple of 8.
    assert takes_explicit_route(*tensors((8, 4, 200, 10), (8, 4, 200, 10),
                                         (8, 4, 200, 10), dtype=dtype))
    # An aligned query with unaligned values.
    assert takes_explicit_route(*tensors((8, 4, 200, 8), (8, 4, 200, 8),
                                         (8, 4, 200, 12), dtype=dtype))
    # Aligned head dims, few keys or many: the fused kernels.
    for keys in (9, 16, 49):
        assert not takes_explicit_route(*tensors(
            (8, 4, 49, 32), (8, 4, keys, 32), (8, 4, keys, 32),
            dtype=dtype))


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_rule_keeps_batches_the_fused_kernels_cannot_launch(dtype):
    """More than 65535 batch entries (PyramidTNT's sentences at batch 64)
    or heads take the explicit products, whatever the dtype."""
    def route(*leading):
        q = torch.empty(*leading, 16, 8, dtype=dtype).expand(
            *leading, 16, 8)
        return takes_explicit_route(q, q, q)

    assert not route(MAX_FUSED_BATCH, 2)
    assert route(MAX_FUSED_BATCH + 1, 2)
    assert route(2, 33000, 2)  # batch dims multiply
    assert route(2, MAX_FUSED_BATCH + 1)
    assert not route(2, 32000, 2)


def test_rule_keeps_float32_on_the_fused_kernel_outside_autocast():
    shapes = (8, 4, 16, 6), (8, 4, 16, 6), (8, 4, 16, 6)
    assert not takes_explicit_route(*tensors(*shapes))
    assert not takes_explicit_route(*tensors(*shapes, dtype=torch.float64))
    # Under autocast a float32 query is multiplied in the autocast dtype.
    with torch.autocast('cpu', dtype=torch.bfloat16):
        assert takes_explicit_route(*tensors(*shapes))
        assert not takes_explicit_route(*tensors(
            (8, 4, 49, 32), (8, 4, 49, 32), (8, 4, 49, 32)))


def test_layers_take_the_route_of_their_attn_impl():
    """The plain attention modules reach the rule: a bfloat16 LSA with
    head dim 6 computes the explicit products bit for bit, one with head
    dim 8 the fused kernel."""
    x = torch.randn(2, 14 * 14, 24, dtype=torch.bfloat16)
    for num_heads, explicit in [(4, True), (3, False)]:
        torch.manual_seed(0)
        layer = LocallyGroupedAttention(24, num_heads).bfloat16()
        with torch.no_grad():
            auto = layer(x, (14, 14))
            set_attention_impl(layer, 'explicit')
            assert torch.equal(layer(x, (14, 14)), auto) == explicit


def relative_error(actual, expected):
    return float((actual.double() - expected).norm() / expected.norm())


def outputs_and_gradients(attention, inputs, mask, grad_out, dtype):
    """The output and the gradients of query, key, value (and of a float
    mask) of ``attention`` in ``dtype``."""
    leaves = [t.detach().to(dtype).requires_grad_() for t in inputs]
    if mask is not None and mask.is_floating_point():
        mask = mask.detach().to(dtype).requires_grad_()
        leaves.append(mask)
    out = attention(*leaves[:3], attn_mask=mask)
    out.backward(grad_out.to(dtype))
    return [out] + [leaf.grad for leaf in leaves]


@pytest.mark.parametrize('mask_kind', [None, 'bool', 'bias'])
@pytest.mark.parametrize('keys, head_dim', [(16, 6), (49, 32), (16, 8)])
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16],
                         ids=['bfloat16', 'float16'])
def test_both_routes_match_float64(dtype, keys, head_dim, mask_kind):
    gen = torch.Generator().manual_seed(0)
    shape = (16, 4, keys, head_dim)
    inputs = [torch.randn(shape, generator=gen, dtype=torch.float64)
              for _ in range(3)]
    grad_out = torch.randn(shape, generator=gen, dtype=torch.float64)
    mask = None
    if mask_kind == 'bool':
        mask = (torch.arange(keys) < keys - 3).view(1, 1, 1, keys)
    elif mask_kind == 'bias':
        mask = torch.randn(1, 4, keys, keys, generator=gen,
                           dtype=torch.float64)
    reference = outputs_and_gradients(F.scaled_dot_product_attention,
                                      inputs, mask, grad_out, torch.float64)
    tolerance = ROUNDOFFS_ALLOWED * UNIT_ROUNDOFF[dtype]
    for route in (explicit_attention, F.scaled_dot_product_attention):
        results = outputs_and_gradients(route, inputs, mask, grad_out, dtype)
        for name, result, expected in zip(
                ['output', 'query', 'key', 'value', 'bias'], results,
                reference):
            assert result.dtype == dtype
            error = relative_error(result, expected)
            assert error <= tolerance, (
                f'{route.__name__} {name}: {error / UNIT_ROUNDOFF[dtype]:.1f}'
                ' u')


@pytest.mark.parametrize('num_heads', [4, 3], ids=['explicit', 'fused'])
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_padded_windows_give_no_nan(dtype, num_heads):
    """SVT's LSA on a map that pads its windows (keys masked): finite
    outputs and gradients in both routes, close to float64."""
    torch.manual_seed(0)
    attn = LocallyGroupedAttention(24, num_heads, window_size=7).double()
    x = torch.randn(2, 9 * 11, 24, dtype=torch.float64)
    reference = attn(x, (9, 11))
    low = LocallyGroupedAttention(24, num_heads, window_size=7)
    low.load_state_dict(attn.state_dict())
    low = low.to(dtype)
    x_low = x.to(dtype).requires_grad_()
    out = low(x_low, (9, 11))
    out.float().square().sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x_low.grad).all()
    for p in low.parameters():
        assert torch.isfinite(p.grad).all()
    assert relative_error(out, reference) <= 8 * UNIT_ROUNDOFF[dtype]


def test_routed_function_keeps_dtype_and_dropout():
    torch.manual_seed(0)
    q = torch.randn(2, 4, 16, 6, dtype=torch.bfloat16)
    ones = torch.ones_like(q)
    out = scaled_dot_product_attention(q, q, ones)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, ones)
    # With dropout the kept weights, rescaled, no longer sum to one.
    dropped = scaled_dot_product_attention(q, q, ones, dropout_p=0.5)
    assert not torch.allclose(dropped, ones)
