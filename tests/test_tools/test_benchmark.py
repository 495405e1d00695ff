"""benchmarks.benchmark and benchmarks.measure: the tables and their ratios
on known timings, the measuring core, the memory of a train step, bad
input, and one small run of the command line."""
import argparse
import importlib
import subprocess
import sys
import textwrap

import pytest
import torch
from tool_utils import REPO

from benchmarks import benchmark, measure
from benchmarks.benchmark import main as benchmark_main
from benchmarks.variants import Benchmark

COMMANDS = ('benchmark', 'gpu_benchmark', 'dense_benchmark',
            'attention_routes', 'onnx_benchmark', 'int8_benchmark',
            'mask_rcnn_onnx_benchmark')


def table_rows(stdout):
    """The rows of the printed Markdown table, as lists of cells."""
    lines = [line for line in stdout.splitlines() if line.startswith('| ')]
    return [[cell.strip() for cell in line.strip('|').split('|')]
            for line in lines[1:]]


class ScriptedModel(torch.nn.Linear):
    """A model whose runners return ``seconds``, one value a call."""

    def __init__(self, seconds):
        super().__init__(1, 1)
        self.seconds = seconds


def scripted_runner(mode, model, images, labels, autocast, optimizer=None):
    seconds = iter(model.seconds[mode])
    return lambda: next(seconds)


@pytest.fixture
def scripted(monkeypatch):
    """mmtnt and timm with known seconds per round; mmseg missing."""
    models = dict(
        mmtnt=ScriptedModel(dict(forward=[0.5, 0.25], train=[1., 2.])),
        timm=ScriptedModel(dict(forward=[1., 1.], train=[1., 8.])))
    monkeypatch.setattr(
        benchmark, 'build_candidates', lambda *args, **kwargs:
        (models, dict(mmseg='ImportError: no mmseg')))
    monkeypatch.setattr(benchmark, 'step_runner', scripted_runner)


def test_rows_give_medians_and_per_round_ratios(scripted, capsys):
    benchmark_main([
        'svt-s', '--compare', '--img-size', '32', '--batch-size', '2',
        '--rounds', '2', '--warmup', '0', '--no-flops', '--default-malloc',
        '--threads', str(torch.get_num_threads())
    ])
    out = capsys.readouterr().out
    assert 'svt-s: mmseg skipped (ImportError: no mmseg)' in out
    header, *_ = [line for line in out.splitlines() if line.startswith('| ')]
    assert header == ('| model | impl | forward | GFLOP/s (of peak) | time '
                      'peer/mmtnt | train step | GFLOP/s (of peak) | time '
                      'peer/mmtnt |')
    # forward: 2 images / median(0.5, 0.25) s; timm / mmtnt per round:
    # 2 and 4. train: medians 1.5 s and 4.5 s; ratios 1 and 4.
    assert table_rows(out) == [
        ['svt-s (32x32)', 'mmtnt', '5.3 img/s', '-', '-', '1500 ms', '-',
         '-'],
        ['svt-s (32x32)', 'timm', '2.0 img/s', '-', '3.00 (2.00-4.00)',
         '4500 ms', '-', '2.50 (1.00-4.00)'],
    ]


def test_summary_counts_flops_and_memory_ratios():
    results = dict(
        forward=dict(mmtnt=[0.5], timm=[1.]),
        memory=dict(mmtnt=[10 * 2**20], timm=[40 * 2**20]))
    args = argparse.Namespace(batch_size=2)
    rows = benchmark.summarize(
        Benchmark('svt-s', {}, (32, 32), {}), results, macs=1e9,
        skipped={}, args=args, peak=16.)
    # 2 FLOPs x 1e9 MACs x 2 images / 0.5 s = 8 GFLOP/s, half the peak;
    # memory mmtnt/peer = 10 / 40.
    assert rows == [
        ['svt-s (32x32)', 'mmtnt', '4.0 img/s', '8 (50%)', '-', '10 MiB',
         '-'],
        ['svt-s (32x32)', 'timm', '2.0 img/s', '4 (25%)', '2.00', '40 MiB',
         '0.25'],
    ]
    assert len(benchmark.table_header(['forward', 'memory'])) == len(rows[0])


def test_rounds_rotate_and_time_with_the_clock():
    calls = []
    values = measure.interleaved_rounds(
        dict(a=lambda: calls.append('a') or 1,
             b=lambda: calls.append('b') or 2,
             c=lambda: calls.append('c') or 3), warmup=1, rounds=3)
    assert calls == ['a', 'b', 'c'] + ['a', 'b', 'c', 'b', 'c', 'a', 'c',
                                       'a', 'b']
    assert values == dict(a=[1] * 3, b=[2] * 3, c=[3] * 3)
    ticks = iter([10., 10.25])
    assert measure.timed(lambda: None, clock=lambda: next(ticks)) == 0.25
    assert measure.ratio_cell([2., 6.], [4., 4.], peer_over_own=False) == \
        '1.33 (0.67-2.00)'
    assert measure.format_times([0.0104, 0.0125, 0.0096]) == '10 (10-12)'


def test_memory_sees_the_tensor_gelu_mlp_does_not_keep():
    """A train step of an MLP over 16384 tokens of hidden width 512 (32 MiB
    per hidden tensor) needs one such tensor less with gelu_mlp (in a
    process of its own: malloc gives freed memory back there)."""
    script = textwrap.dedent("""
        import contextlib
        import torch
        from benchmarks.measure import train_step_memory
        from mmtnt.accel import accelerate_for_cpu, release_freed_memory
        from mmtnt.accel.modules import CpuMlp
        from mmtnt.models.layers import Mlp

        assert release_freed_memory()
        torch.manual_seed(0)
        mlp = accelerate_for_cpu(Mlp(16, 512))
        model = torch.nn.Sequential(mlp, torch.nn.Flatten(1),
                                    torch.nn.Linear(16384 * 16, 10))
        images = torch.randn(1, 16384, 16)
        labels = torch.zeros(1, dtype=torch.long)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        step = lambda: train_step_memory(
            model, optimizer, images, labels, contextlib.nullcontext)
        ours = step()
        CpuMlp._uses_gelu_mlp = lambda self: False
        plain = step()
        print((plain - ours) / 2**20)
    """)
    result = subprocess.run([sys.executable, '-c', script], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    saved_mib = float(result.stdout.split()[-1])
    assert saved_mib == pytest.approx(32, rel=0.2)


def test_compile_speedup_times_eager_and_compiled_in_turns(
        monkeypatch, capsys):
    """Each implementation runs eager and through ``torch.compile`` (its
    wrapper, never called here) with the height and width marked dynamic;
    the speedup is the median per-round ratio eager / compiled."""
    models = dict(mmtnt=ScriptedModel(dict(
        eager=dict(train=[1., 2., 4.]), compiled=dict(train=[2., 1., 1.]))))
    dynamic = []

    def runner(mode, model, images, labels, autocast, optimizer=None):
        dynamic.append(images._dynamo_dynamic_indices)
        compiled = isinstance(model, torch._dynamo.eval_frame.OptimizedModule)
        seconds = iter(model.seconds['compiled' if compiled else 'eager'][
            mode])
        return lambda: next(seconds)

    monkeypatch.setattr(benchmark, 'build_candidates', lambda *args, **kw:
                        (models, {}))
    monkeypatch.setattr(benchmark, 'step_runner', runner)
    benchmark_main([
        'svt-s', '--compile-speedup', '--modes', 'train', '--img-size', '32',
        '48', '--rounds', '3', '--warmup', '0', '--default-malloc'
    ])
    out = capsys.readouterr().out
    assert 'torch.compile (inductor, dynamic height and width)' in out
    assert dynamic == [{2, 3}, {2, 3}]
    # eager / compiled per round: 0.5, 2 and 4.
    assert table_rows(out) == [[
        'svt-s (32x48)', 'mmtnt', '2000 ms', '1000 ms', '2.00 (0.50-4.00)'
    ]]


def test_one_small_run_of_mmtnt(capsys):
    benchmark_main([
        'pyramidtnt-ti', '--modes', 'forward', 'train', '--img-size', '32',
        '--batch-size', '1', '--rounds', '1', '--warmup', '0', '--no-flops',
        '--default-malloc', '--threads', str(torch.get_num_threads())
    ])
    out = capsys.readouterr().out
    assert "glibc's default malloc" in out
    [row] = table_rows(out)
    assert row[:2] == ['pyramidtnt-ti (32x32)', 'mmtnt']
    assert float(row[2].split()[0]) > 0 and float(row[5].split()[0]) > 0


@pytest.mark.parametrize('args, message', [
    (['no-such-model'], "Unknown benchmark 'no-such-model'"),
    (['configs/none.py'], 'config file not found'),
    (['svt-s', '--img-size', '1', '2', '3'], '--img-size takes H or H W'),
    (['svt-s', '--amp-dtype', 'float16'], '--amp-dtype needs --amp'),
    (['svt-s', '--rounds', '0'], '--rounds must be positive'),
    (['svt-s', '--amp-speedup', '--amp'], 'leave out --amp'),
    (['svt-s', '--compile-speedup', '--modes', 'memory'],
     'leave out --amp-speedup and the memory mode'),
])
def test_bad_input_says_what_is_allowed(capsys, args, message):
    with pytest.raises(SystemExit) as error:
        benchmark_main(args)
    assert message in str(error.value) + capsys.readouterr().err


def test_list_names_every_variant(capsys):
    benchmark_main(['--list'])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(':')[0] for line in lines] == [
        'tnt-s', 'tnt-b', 'pyramidtnt-ti', 'pyramidtnt-s', 'pyramidtnt-m',
        'pyramidtnt-b', 'pcpvt-s', 'pcpvt-b', 'pcpvt-l', 'svt-s', 'svt-b',
        'svt-l'
    ]
    assert lines[0] == 'tnt-s: 224px, timm, mmpretrain'
    assert lines[2] == 'pyramidtnt-ti: 192px, no peers'
    assert lines[-1] == 'svt-l: 224px, timm, mmpretrain, mmseg'


@pytest.mark.parametrize('command', COMMANDS)
def test_every_command_line_parses(command, capsys):
    """``python -m benchmarks.COMMAND``: the module has a ``main`` whose
    parser builds (no option added twice)."""
    module = importlib.import_module(f'benchmarks.{command}')
    with pytest.raises(SystemExit) as error:
        module.main(['--help'])
    assert error.value.code == 0
    assert capsys.readouterr().out.startswith('usage:')
