"""PyramidTNT's attention bias resized to other grids: bicubic over the
query grid and over the key grid, in either order the same up to
rounding."""
import pytest
import torch
import torch.nn.functional as F

from mmtnt.models.utils import resize_attention_bias


def resized_keys_first(bias, src_q, src_k, dst_q, dst_k):
    """The same resize in the other order, in float64: keys, then
    queries."""
    _, heads, nq, nk = bias.shape
    x = bias.double().reshape(1, heads * nq, *src_k)
    x = F.interpolate(x, size=dst_k, mode='bicubic', align_corners=False)
    x = x.reshape(heads, nq, -1).transpose(1, 2)
    x = x.reshape(1, -1, *src_q)
    x = F.interpolate(x, size=dst_q, mode='bicubic', align_corners=False)
    x = x.reshape(heads, dst_k[0] * dst_k[1], -1).transpose(1, 2)
    return x[None]


@pytest.mark.parametrize('dst_q,dst_k', [((13, 7), (3, 1)), ((8, 8), (5, 6)),
                                         ((20, 30), (2, 2))])
def test_the_resize_is_separable_in_either_order(dst_q, dst_k):
    bias = torch.randn(1, 3, 8 * 8, 2 * 2,
                       generator=torch.Generator().manual_seed(0))
    out = resize_attention_bias(bias, (8, 8), (2, 2), dst_q, dst_k)
    assert out.shape == (1, 3, dst_q[0] * dst_q[1], dst_k[0] * dst_k[1])
    assert out.is_contiguous()
    expected = resized_keys_first(bias, (8, 8), (2, 2), dst_q, dst_k)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=0)
