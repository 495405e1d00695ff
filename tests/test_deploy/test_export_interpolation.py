"""Bicubic resizing by matrices (``resize_impl='matrices'``, set during
the export): two matrix products that give PyTorch's result, in PyTorch
and in ONNX Runtime at sizes other than the export's, with no cubic
``Resize`` in the graph."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx_graphs import op_types

from mmtnt.deploy import cpu_session, export_onnx
from mmtnt.deploy.graphs import export_friendly
from mmtnt.models import set_resize_impl
from mmtnt.models.utils import (resize_attention_bias, resize_bicubic,
                                resize_pos_embed)
from mmtnt.models.utils.resize import bicubic_matrix

ATOL = 1e-5


@pytest.mark.parametrize('src,dst', [((8, 8), (13, 21)), ((14, 14), (14, 14)),
                                     ((32, 32), (5, 7)), ((3, 5), (1, 9))])
def test_bicubic_matrices_equal_pytorch(src, dst):
    grid = torch.randn(2, 5, *src, generator=torch.Generator().manual_seed(0))
    expected = F.interpolate(grid, size=dst, mode='bicubic',
                             align_corners=False)
    out = resize_bicubic(grid, dst, 'matrices')
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)


def test_rows_sum_to_one_and_taps_clamp_at_the_edges():
    matrix = bicubic_matrix(3, 7, torch.zeros(1, dtype=torch.float64))
    torch.testing.assert_close(matrix.sum(1),
                               torch.ones(7, dtype=torch.float64))
    # upsampling a 3-wide axis: the first output reads taps -2..1, which
    # clamp to 0, 0, 0, 1
    assert matrix[0, 2] == 0 and matrix[0, 0] > 0.9


def test_unknown_resize_impl_is_refused():
    with pytest.raises(ValueError, match="'interpolate', 'matrices'"):
        resize_bicubic(torch.zeros(1, 1, 2, 2), (3, 3), 'matrix')
    with pytest.raises(ValueError, match="'interpolate', 'matrices'"):
        set_resize_impl(nn.Linear(1, 1), 'bilinear')


class LearnedGrids(nn.Module):
    """A position embedding and an attention bias learned on 8x8 and 2x2
    grids, resized to the input's (as TNT and PyramidTNT do)."""
    resize_impl = 'interpolate'

    def __init__(self):
        super().__init__()
        self.pos_embed = nn.Parameter(torch.randn(1, 1 + 64, 4))
        self.bias = nn.Parameter(torch.randn(1, 2, 64, 4))

    def forward(self, x):
        grid = tuple(x.shape[-2:])
        keys = (grid[0] // 4, grid[1] // 4)
        pos = resize_pos_embed(self.pos_embed, (8, 8), grid, 1,
                               self.resize_impl)
        bias = resize_attention_bias(self.bias, (8, 8), (2, 2), grid, keys,
                                     self.resize_impl)
        image = x.flatten(1).mean(-1, keepdim=True)
        return pos[:, 1:].sum(-1) + bias.sum((1, 3)) + image


def test_exported_grids_follow_the_input_without_resize(tmp_path):
    torch.manual_seed(0)
    module = LearnedGrids().eval()
    onnx_file = str(tmp_path / 'grids.onnx')
    export_onnx(module, onnx_file, (8, 12), dynamic=True, channels=1)
    assert 'Resize' not in op_types(onnx_file)
    session = cpu_session(onnx_file, num_threads=1)
    for shape in [(2, 1, 8, 12), (1, 1, 16, 8), (1, 1, 32, 28)]:
        images = torch.randn(shape)
        output, = session.run(None, {'input': images.numpy()})
        with torch.no_grad():
            expected = module(images).numpy()
        np.testing.assert_allclose(output, expected, atol=1e-4, rtol=0)


def test_matrices_are_set_for_the_export_only():
    module = nn.Sequential(LearnedGrids(), LearnedGrids())
    module[1].resize_impl = 'matrices'
    with export_friendly(module):
        assert [m.resize_impl for m in module] == ['matrices'] * 2
    assert [m.resize_impl for m in module] == ['interpolate', 'matrices']
    assert 'resize_impl' not in vars(module[0])


class PositionedTokens(nn.Module):
    """Pixels as tokens, projected, plus a position embedding learned on
    an 8x8 grid and resized to the input's."""
    resize_impl = 'interpolate'

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.pos_embed = nn.Parameter(torch.randn(1, 64, 4))

    def forward(self, x):
        grid = tuple(x.shape[-2:])
        tokens = self.proj(x.flatten(2).transpose(1, 2))
        return tokens + resize_pos_embed(self.pos_embed, (8, 8), grid,
                                         impl=self.resize_impl)


@pytest.mark.parametrize('mode', ['dynamic', 'static'])
def test_quantized_graphs_keep_the_resized_positions_fp32(mode, tmp_path):
    import onnx

    from mmtnt.deploy.quantize import image_independent_nodes, quantize_onnx
    torch.manual_seed(0)
    module = PositionedTokens().eval()
    fp32, int8 = str(tmp_path / 'fp32.onnx'), str(tmp_path / 'int8.onnx')
    export_onnx(module, fp32, (8, 12), dynamic=True, channels=4)
    resizes = image_independent_nodes(onnx.load(fp32), ('MatMul', 'Gemm'))
    assert len(resizes) == 2  # rows @ grid, then @ cols^T
    rng = np.random.default_rng(0)
    images = [
        rng.standard_normal(shape, np.float32)
        for shape in [(1, 4, 8, 12), (2, 4, 16, 8)]
    ]
    # keep_boundaries=False: the projection is the static mode's first and
    # last weighted node at once
    quantize_onnx(fp32, int8, mode, calibration=images,
                  keep_boundaries=False)
    nodes = {node.name: node.op_type for node in onnx.load(int8).graph.node}
    assert all(nodes.get(name) == 'MatMul' for name in resizes)
    assert set(nodes.values()) & {'DynamicQuantizeMatMul', 'MatMulInteger',
                                  'QuantizeLinear'}
    sessions = [cpu_session(f, num_threads=1) for f in (fp32, int8)]
    for image in images:
        expected, output = (s.run(None, {'input': image})[0]
                            for s in sessions)
        np.testing.assert_allclose(output, expected, atol=0.1, rtol=0)
