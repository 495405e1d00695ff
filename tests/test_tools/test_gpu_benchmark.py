"""benchmarks.gpu_benchmark and benchmarks.attention_routes: their tables
on known timings and memory, the time budget, bad input, and the attention
shapes recorded from a model."""
import pytest
import torch
from test_benchmark import ScriptedModel, scripted_runner, table_rows

from benchmarks import attention_routes, gpu_benchmark
from benchmarks.attention_routes import main as attention_routes_main
from benchmarks.gpu_benchmark import main as gpu_benchmark_main

SMALL = ('--device', 'cpu', '--img-size', '32', '--forward-batches', '2',
         '--train-batch', '2', '--rounds', '2', '--warmup', '1')


def sections(markdown):
    """Precision label -> the rows of its table."""
    parts = markdown.split('#### ')[1:]
    return {
        part.splitlines()[0]: table_rows('\n'.join(part.splitlines()[1:]))
        for part in parts
    }


@pytest.fixture
def scripted(monkeypatch):
    """mmtnt and timm with known seconds (a warm-up value first) and
    memory."""
    seconds = dict(
        mmtnt=dict(forward=[9., 0.5, 0.25], train=[9., 0.1, 0.2]),
        timm=dict(forward=[9., 1., 1.], train=[9., 0.2, 0.2]))
    memory = dict(mmtnt=iter([10 * 2**20]), timm=iter([20 * 2**20]))

    def build_candidates(bench, device, compare, impls):
        return {impl: ScriptedModel(seconds[impl]) for impl in seconds}, {}

    def train_step_memory(model, *args):
        impl = 'mmtnt' if model.seconds is seconds['mmtnt'] else 'timm'
        return next(memory[impl])

    monkeypatch.setattr(gpu_benchmark, 'build_candidates', build_candidates)
    monkeypatch.setattr(gpu_benchmark, 'step_runner', scripted_runner)
    monkeypatch.setattr(gpu_benchmark, 'train_step_memory',
                        train_step_memory)


def test_table_gives_rates_and_ratios_per_precision(scripted, tmp_path):
    out = tmp_path / 'gpu.md'
    args = gpu_benchmark.parse_args(
        ['svt-s', *SMALL, '--precisions', 'fp32', '--out', str(out)])
    report = gpu_benchmark.run(args, torch.device('cpu'))
    assert out.read_text() == report.markdown()
    assert 'train batch: svt-s 2.' in report.markdown()
    tables = sections(report.markdown())
    # forward: 2 images / median s; train: median ms; memory: MiB.
    assert tables == {
        'float32, TF32 off': [
            ['svt-s (32x32)', 'mmtnt', '5', '-', '150.0', '-', '10', '-'],
            ['svt-s (32x32)', 'timm', '2', '3.00 (2.00-4.00)', '200.0',
             '1.50 (1.00-2.00)', '20', '0.50'],
        ]
    }
    header = report.markdown().split('#### ')[1].splitlines()[2]
    assert header.count('|') == len(tables['float32, TF32 off'][0]) + 1


def test_time_budget_leaves_out_what_would_start_late(scripted):
    args = gpu_benchmark.parse_args(['svt-s', 'pcpvt-s', *SMALL,
                                     '--precisions', 'fp32',
                                     '--time-budget', '0.0001'])
    markdown = gpu_benchmark.run(args, torch.device('cpu')).markdown()
    # The first measurement starts before the budget is checked again.
    assert [row[1] for row in sections(markdown)['float32, TF32 off']
            ] == ['mmtnt', 'timm']
    assert '- pcpvt-s: not measured (time budget' in markdown


def test_default_variants_have_train_batches():
    args = gpu_benchmark.parse_args([])
    assert args.names == ['tnt-s', 'tnt-b', 'pyramidtnt-s', 'pyramidtnt-b',
                          'pcpvt-s', 'pcpvt-b', 'svt-s', 'svt-b']
    assert gpu_benchmark.train_batch_size('tnt-s') == 64
    assert gpu_benchmark.train_batch_size('svt-s', override=3) == 3


@pytest.mark.parametrize('args, message', [
    (['svt-s', '--precisions', 'tf32'], 'tf32 needs a CUDA device'),
    (['svt-s', '--rounds', '0'], '--rounds must be positive'),
])
def test_bad_arguments(capsys, args, message):
    with pytest.raises(SystemExit) as error:
        gpu_benchmark_main([*args, '--device', 'cpu'])
    assert error.value.code not in (0, None)
    assert message in str(error.value.code) + capsys.readouterr().err


def test_routes_take_turns_and_a_failing_route_is_nan(monkeypatch):

    def refuses(*args, **kwargs):
        raise RuntimeError('no kernel for this shape\nmore')

    monkeypatch.setattr(
        attention_routes, 'route_runners', lambda device: dict(
            explicit=attention_routes.explicit_attention, sdpa=refuses))
    seconds = iter([0.004, 0.002, 0.003])
    monkeypatch.setattr(attention_routes, 'timed',
                        lambda step, device: next(seconds))
    args = attention_routes.parse_args(
        ['--sweep-keys', '4', '--rounds', '3', '--warmup', '0'])
    rows, routes = attention_routes.rows_for(
        'sweep', attention_routes.sweep_shapes([4], [8], 1, 1),
        torch.float32, torch.device('cpu'), args)
    assert routes == ['explicit', 'sdpa']
    [row] = rows
    assert row[1:5] == ['1x1x4x8', '4', '8', '-']
    # The median of the explicit route; nan for the failing one, which
    # counts as the slower: the rule's pick (sdpa in float32) is not.
    assert row[5:] == ['3.000', 'nan', 'nan', 'sdpa', 'no']


def test_attention_routes_record_the_shapes_of_a_model(capsys):
    attention_routes_main([
        'tnt-s', '--device', 'cpu', '--batch-size', '1', '--img-size',
        '64', '--rounds', '1', '--warmup', '0', '--dtype', 'bfloat16'
    ])
    rows = table_rows(capsys.readouterr().out)
    # TNT-S at 64x64: 16 sentences of 16 words of head dim 6, and the
    # outer attention over 17 tokens of head dim 64.
    inner, outer = rows
    assert inner[:5] == ['tnt-s', '16x4x16x6', '16', '6', '-']
    assert inner[-2] == 'explicit'
    assert outer[:4] == ['tnt-s', '1x6x17x64', '17', '64']
    assert outer[-2] == 'sdpa'
