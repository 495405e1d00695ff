"""Tests of tools/analysis_tools/get_flops.py (mmtnt.analysis.flops,
complexity and cli): the attention handle, the counts of small models, the
CLI on a classifier, a detector and a segmentor, bad input, and the
parameters of docs/model_complexity.md."""
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.analysis import FlopAnalyzer
from tiny_backbones import TINY_BACKBONES
from tool_utils import BASE_CONFIG, REPO, run_tool

from mmtnt.analysis import cli, complexity, flops

TOOL = 'analysis_tools/get_flops.py'
DOC = REPO / 'docs' / 'model_complexity.md'
CLS_CONFIG = 'configs/pyramid_tnt/pyramid-tnt-ti_8xb128_in1k-192px.py'
DET_CONFIG = 'configs/demo/mask-rcnn_svt-demo_fpn_1xb8-20e_demo-coco.py'
SEG_CONFIG = 'configs/demo/upernet_pcpvt-demo_1xb8-2k_demo-ade-128x128.py'


class SDPA(nn.Module):

    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class ExplicitAttention(nn.Module):

    def forward(self, q, k, v):
        attn = (q @ k.transpose(-2, -1) * q.shape[-1]**-0.5).softmax(-1)
        return attn @ v


def attention_inputs():
    """q (2, 3, 5, 4), k (2, 3, 7, 4), v (2, 3, 7, 6): batch 2, 3 heads,
    5 queries, 7 keys, d_qk 4, d_v 6; the mask hides keys."""
    q, k, v = torch.rand(2, 3, 5, 4), torch.rand(2, 3, 7, 4), torch.rand(
        2, 3, 7, 6)
    mask = torch.ones(1, 1, 5, 7, dtype=torch.bool)
    mask[..., -2:] = False
    return q, k, v, mask


# q @ k^T: 2 * 3 * 5 * 7 * 4 = 840; attn @ v: 2 * 3 * 5 * 7 * 6 = 1260.
ATTENTION_MACS = 840 + 1260


def test_mmengine_does_not_count_sdpa():
    """Why the tool adds a handle: mmengine skips the operator."""
    analyzer = FlopAnalyzer(SDPA(), attention_inputs())
    analyzer.unsupported_ops_warnings(False)
    assert analyzer.total() == 0
    assert 'aten::scaled_dot_product_attention' in analyzer.unsupported_ops()


def test_sdpa_handle_counts_both_products():
    analyzer = flops.flop_analyzer(SDPA(), attention_inputs())
    assert analyzer.total() == ATTENTION_MACS
    assert analyzer.by_operator() == {
        'scaled_dot_product_attention': ATTENTION_MACS
    }
    assert not analyzer.unsupported_ops()


def test_sdpa_handle_equals_explicit_matmuls():
    q, k, v, _ = attention_inputs()
    explicit = flops.flop_analyzer(ExplicitAttention(), (q, k, v))
    assert explicit.total() == ATTENTION_MACS
    assert explicit.by_operator() == {'matmul': ATTENTION_MACS}


def test_linear_and_conv_counts():
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
        nn.Linear(8 * 10 * 10, 10))
    analyzer = flops.flop_analyzer(model, (torch.rand(1, 3, 10, 10), ))
    conv = 8 * 10 * 10 * 3 * 3 * 3  # outputs x kernel x in channels
    linear = 800 * 10
    assert analyzer.by_operator() == {'conv': conv, 'linear': linear}
    assert analyzer.total() == conv + linear == 29600


def report_value(output, key):
    """The integer after ``key: `` in the tool's report."""
    match = re.search(rf'^{key}: ([\d,]+)', output, flags=re.M)
    assert match, output
    return int(match.group(1).replace(',', ''))


def test_cli_on_a_classifier():
    result = run_tool(TOOL, CLS_CONFIG, timeout=120)
    assert result.returncode == 0
    out = result.stdout
    cfg = flops.load_config(str(REPO / CLS_CONFIG))
    model = flops.build_eval_model(cfg)
    assert report_value(out, 'params') == sum(
        p.numel() for p in model.parameters())
    # PyramidTNT-Ti's published input; the paper reports 0.6G MACs.
    assert "input: 1x3x192x192 (the test pipeline's crop)" in out
    assert round(report_value(out, 'MACs') / 1e9, 1) == 0.6
    assert 'attention matmuls: counted' in out
    assert 'FLOPs are MACs' in out
    assert 'skipped ops (not counted): ' in out
    assert 'prim::PythonOp' not in out
    assert re.search(r'^backbone\s', out, flags=re.M)


def assert_no_hidden_macs(result, module='model.backbone'):
    """An autograd Function (a fused path) traces as one opaque
    ``prim::PythonOp``: its MACs would silently be missing."""
    skipped = result['analyzer'].unsupported_ops(module)
    assert not [op for op in skipped if op.startswith('prim::')], skipped


def test_detector_backbone_and_whole_model():
    cfg = flops.load_config(str(REPO / DET_CONFIG))
    result = flops.analyze(cfg, (100, 150))
    assert_no_hidden_macs(result)
    out = complexity.report(DET_CONFIG, cfg, result)
    # padded to mmdet's pad_size_divisor (32)
    assert 'input: 1x3x100x150 (given by --shape), padded to 128x160' in out
    parts = dict(
        (name, macs) for name, _, macs in re.findall(
            r'^(\w+)\s+(\S+)\s+(\S+)$', out, flags=re.M))
    assert {'backbone', 'neck', 'rpn_head', 'roi_head'} <= set(parts)
    assert 0 < report_value(out, 'MACs')


def test_segmentor_drops_the_auxiliary_head():
    cfg = flops.load_config(str(REPO / SEG_CONFIG))
    result = flops.analyze(cfg, (64, 64))
    assert_no_hidden_macs(result, module='')
    parts = {name: (params, macs) for name, params, macs in result['parts']}
    # The decode head's own resizing runs in decode_head.forward, called
    # without __call__: the trace puts it on the segmentor itself.
    assert set(parts) == {'backbone', 'decode_head', flops.REST}
    assert all(macs > 0 for _, macs in parts.values())
    assert result['macs'] == sum(macs for _, macs in parts.values())
    assert result['attention_macs'] > 0
    assert result['params'] == sum(params for params, _ in parts.values())


def test_tnt_counts_its_attention():
    cfg = flops.load_config(str(BASE_CONFIG))
    result = flops.analyze(cfg)
    assert result['shape'] == (32, 32)  # the backbone's img_size
    assert_no_hidden_macs(result, module='')
    # 2 blocks, q@k^T + attn@v each. Outer: 17 tokens (16 patches of 8x8 +
    # cls), 32 channels. Inner: 16 sentences of 16 words (8 / stride 2 =
    # 4x4 words per patch), 8 channels.
    outer = 2 * 17 * 17 * 32
    inner = 16 * 2 * 16 * 16 * 8
    assert result['attention_macs'] == 2 * (outer + inner)


@pytest.mark.parametrize('family', sorted(TINY_BACKBONES))
def test_all_attention_is_in_the_handle(family):
    """``attention_macs`` counts one operator: an explicit product in a
    backbone's trace would be attention left out of it."""
    backbone = TINY_BACKBONES[family]().eval()
    # At the size the position terms are stored for: PyramidTNT resizes
    # its attention bias by matrix products at any other.
    size = getattr(backbone, 'img_size', (64, 64))
    analyzer = flops.flop_analyzer(backbone, (torch.rand(1, 3, *size), ))
    by_operator = analyzer.by_operator()
    assert by_operator.get(flops.ATTENTION_OP, 0) > 0, by_operator
    products = {'matmul', 'bmm', 'baddbmm', 'einsum'}
    traced = set(by_operator) | {
        op.split('::')[-1]
        for op in analyzer.unsupported_ops()
    }
    assert not products & traced, by_operator


def test_dense_default_shapes():
    for config, shape in ((DET_CONFIG, (800, 1280)), (SEG_CONFIG,
                                                      (512, 512))):
        cfg = flops.load_config(str(REPO / config))
        assert flops.default_shape(cfg)[0] == shape


@pytest.mark.parametrize('argv, message', [
    (['no/such/config.py'], 'config file not found: no/such/config.py'),
    ([CLS_CONFIG, '--shape', '0'], '--shape takes H or H W'),
    ([CLS_CONFIG, '--shape', '1', '2', '3'], '--shape takes H or H W'),
    ([CLS_CONFIG, '--shape', 'big'], "invalid int value: 'big'"),
    ([], 'a config file is required'),
])
def test_bad_input(argv, message, capsys):
    with pytest.raises(SystemExit) as error:
        cli.get_flops(argv)
    assert error.value.code != 0
    assert message in str(error.value.code) + capsys.readouterr().err


def doc_rows():
    """The rows of the generated table of docs/model_complexity.md."""
    text = DOC.read_text()
    begin = text.index(complexity.TABLE_BEGIN)
    end = text.index(complexity.TABLE_END)
    rows = [
        [cell.strip() for cell in line.strip('|').split('|')]
        for line in text[begin:end].splitlines()[3:]
    ]
    return {row[0]: row for row in rows}


def test_doc_params_match_the_configs():
    rows = doc_rows()
    variants = flops.imagenet_variants()
    assert list(variants) == list(complexity.PAPER_NUMBERS)
    assert set(rows) == {variant['label'] for variant in variants.values()}
    for name, variant in variants.items():
        paper_params, paper_macs = complexity.PAPER_NUMBERS[name]
        side = variant['side']
        row = rows[variant['label']]
        cfg = flops.load_config(variant['config'])
        with skip_init():
            model = flops.build_eval_model(cfg)
        params = sum(p.numel() for p in model.parameters()) / 1e6
        assert row[2:6] == [
            str(side), f'{params:.2f}',
            str(paper_params),
            complexity.percent(params, paper_params)
        ], name
        assert row[8] == str(paper_macs), name
        # The published figures: params within 0.5%.
        assert abs(params - paper_params) / paper_params < 0.005, name


class skip_init:
    """Build modules without running their weight initialisers (the
    parameter count does not depend on the values)."""

    NAMES = ('uniform_', 'normal_', 'trunc_normal_', 'constant_', 'ones_',
             'zeros_', 'kaiming_uniform_', 'kaiming_normal_',
             'xavier_uniform_', 'xavier_normal_')

    def __enter__(self):
        self.patch = pytest.MonkeyPatch()
        for name in self.NAMES:
            self.patch.setattr(nn.init, name, lambda tensor, *a, **k: tensor)
        return self

    def __exit__(self, *exc):
        self.patch.undo()


def test_write_doc_replaces_the_block(tmp_path):
    doc = tmp_path / 'doc.md'
    begin, end = complexity.TABLE_BEGIN, complexity.TABLE_END
    doc.write_text(f'intro\n{begin}\nold\n{end}\nafter\n')
    complexity.write_doc(doc, '| new |')
    assert doc.read_text() == f'intro\n{begin}\n| new |\n{end}\nafter\n'
    doc.write_text('no markers\n')
    with pytest.raises(SystemExit, match='block to replace'):
        complexity.write_doc(doc, '| new |')
