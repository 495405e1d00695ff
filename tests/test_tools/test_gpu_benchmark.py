"""tools/analysis_tools/gpu_benchmark.py and attention_routes.py
(mmtnt.analysis.gpu_benchmark, mmtnt.analysis.attention_routes) on the
CPU: the tables they write for a GPU, from small inputs."""
import pytest
from test_benchmark import table_rows
from tool_utils import run_tool

from mmtnt.analysis.gpu_benchmark import main as gpu_benchmark_main

GPU_BENCHMARK = 'analysis_tools/gpu_benchmark.py'
ATTENTION_ROUTES = 'analysis_tools/attention_routes.py'
SMALL = ('--device', 'cpu', '--img-size', '64', '--forward-batches', '1',
         '2', '--train-batch', '2', '--rounds', '2', '--warmup', '1')


def sections(markdown):
    """Precision label -> the rows of its table."""
    parts = markdown.split('#### ')[1:]
    return {
        part.splitlines()[0]: table_rows('\n'.join(part.splitlines()[1:]))
        for part in parts
    }


@pytest.mark.slow
def test_every_precision_gets_a_table_with_ratios(tmp_path):
    out = tmp_path / 'gpu.md'
    result = run_tool(GPU_BENCHMARK, 'svt-s', *SMALL, '--impls', 'mmtnt',
                      'timm', '--precisions', 'fp32', 'bf16-compiled',
                      '--compile-impls', 'mmtnt', '--compile-backend',
                      'aot_eager', '--out', str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    tables = sections(out.read_text())
    assert list(tables) == ['float32, TF32 off',
                            'bfloat16 autocast, torch.compile']
    fp32 = tables['float32, TF32 off']
    assert [row[1] for row in fp32] == ['mmtnt', 'timm']
    for row in fp32:
        forward1, _, forward2, _, train, _, memory, _ = row[2:]
        assert float(forward1) > 0 and float(forward2) > 0
        assert float(train) > 0 and float(memory) > 0
    timm = fp32[1]
    for ratio in (timm[3], timm[5], timm[7], timm[9]):
        assert float(ratio.split()[0]) > 0
    # Compiled: only the implementations asked for.
    assert [row[1] for row in tables['bfloat16 autocast, torch.compile']
            ] == ['mmtnt']
    assert 'train batch: svt-s 2' in result.stdout


def test_time_budget_leaves_out_what_would_start_late(tmp_path):
    out = tmp_path / 'gpu.md'
    result = run_tool(GPU_BENCHMARK, 'svt-s', *SMALL, '--no-peers',
                      '--precisions', 'fp32', '--time-budget', '0.0001',
                      '--out', str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    # The first measurement starts before the budget is checked again.
    assert 'not measured (time budget' not in out.read_text()
    result = run_tool(GPU_BENCHMARK, 'svt-s', 'pcpvt-s', *SMALL,
                      '--no-peers', '--precisions', 'fp32',
                      '--time-budget', '0.0001', '--out', str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'pcpvt-s: not measured (time budget' in out.read_text()


@pytest.mark.parametrize('args, message', [
    (['svt-s', '--precisions', 'tf32'], 'tf32 needs a CUDA device'),
    (['pyramidtnt-m'], "'pyramidtnt-m' has no ImageNet config here"),
    (['svt-s', '--rounds', '0'], '--rounds and --warmup must be positive'),
])
def test_bad_arguments(capsys, args, message):
    with pytest.raises(SystemExit) as error:
        gpu_benchmark_main([*args, '--device', 'cpu'])
    assert error.value.code not in (0, None)
    assert message in str(error.value.code) + capsys.readouterr().err


def test_attention_routes_time_the_shapes_of_a_model():
    result = run_tool(ATTENTION_ROUTES, 'tnt-s', '--device', 'cpu',
                      '--batch-size', '1', '--img-size', '64', '--rounds',
                      '1', '--warmup', '1', '--sweep-keys', '16', '64',
                      '--sweep-head-dims', '12', '32', '--sweep-windows',
                      '4')
    assert result.returncode == 0, result.stderr[-3000:]
    rows = table_rows(result.stdout)
    by_source = {}
    for row in rows:
        by_source.setdefault(row[0], []).append(row)
    # TNT-S at 64x64: 16 sentences of 16 words of head dim 6, and the
    # outer attention over 17 tokens of head dim 64.
    inner, outer = by_source['tnt-s']
    assert inner[1:5] == ['16x4x16x6', '16', '6', '-']
    assert inner[-2] == 'explicit'
    assert outer[1:4] == ['1x6x17x64', '17', '64'] and outer[-2] == 'sdpa'
    sweep = [(row[2], row[3], row[-2]) for row in by_source['sweep']]
    assert sweep == [('16', '12', 'explicit'), ('64', '12', 'explicit'),
                     ('16', '32', 'sdpa'), ('64', '32', 'sdpa')]
    for row in rows:
        assert float(row[5]) > 0 and float(row[6]) > 0
