"""tools/analysis_tools/benchmark.py (mmtnt.analysis.benchmark): tables,
peers, memory, bad input."""
import subprocess
import sys
import textwrap

import pytest
from tool_utils import REPO, run_tool

from mmtnt.analysis.benchmark import main as benchmark_main

BENCHMARK = 'analysis_tools/benchmark.py'
QUICK = ('--img-size', '64', '--batch-size', '1', '--rounds', '2',
         '--warmup', '0', '--threads', '1')


def table_rows(stdout):
    """The rows of the printed Markdown table, as lists of cells."""
    lines = [line for line in stdout.splitlines() if line.startswith('| ')]
    return [[cell.strip() for cell in line.strip('|').split('|')]
            for line in lines[1:]]


def test_compare_prints_every_peer_with_ratios_and_flops():
    result = run_tool(BENCHMARK, 'svt-s', '--compare', '--modes', 'forward',
                      'train', 'memory', *QUICK)
    assert result.returncode == 0
    rows = table_rows(result.stdout)
    assert [row[1] for row in rows] == ['mmtnt', 'mmtnt-plain', 'timm',
                                        'mmpretrain', 'mmseg']
    assert 'mmtnt with the CPU accelerator' in result.stdout
    for row in rows:
        forward, forward_flops, _, train, train_flops, _, memory, _ = row[2:]
        assert float(forward.split()[0]) > 0
        assert float(train.split()[0]) > 0
        assert float(memory.split()[0]) > 0
        # GFLOP/s and the fraction of the matmul peak.
        assert forward_flops.endswith('%)') and train_flops.endswith('%)')
    for peer in rows[1:]:
        for cell in (peer[4], peer[7], peer[9]):
            assert float(cell.split()[0]) > 0
    assert 'matmul peak' in result.stdout
    assert 'malloc gives freed memory back at once' in result.stdout


def test_no_cpu_accel_runs_the_plain_backbone():
    result = run_tool(BENCHMARK, 'svt-s', '--compare', '--impls', 'mmtnt',
                      'mmtnt-plain', 'timm', '--modes', 'forward',
                      '--no-flops', '--no-cpu-accel', *QUICK)
    assert result.returncode == 0
    assert [row[1] for row in table_rows(result.stdout)] == ['mmtnt', 'timm']
    assert 'mmtnt without the CPU accelerator' in result.stdout


def test_default_malloc_is_said():
    result = run_tool(BENCHMARK, 'svt-s', '--modes', 'forward',
                      '--default-malloc', '--no-flops', *QUICK)
    assert result.returncode == 0
    assert "glibc's default malloc" in result.stdout
    result = run_tool(BENCHMARK, 'svt-s', '--modes', 'forward', '--no-flops',
                      *QUICK)
    assert 'malloc keeps freed memory' in result.stdout


def test_config_finds_the_variants_peers():
    result = run_tool(BENCHMARK,
                      'configs/twins/twins-pcpvt-small_8xb128_in1k.py',
                      '--compare', '--impls', 'mmtnt', 'timm', '--modes',
                      'forward', '--no-flops', *QUICK)
    assert result.returncode == 0
    rows = table_rows(result.stdout)
    assert [row[1] for row in rows] == ['mmtnt', 'timm']
    assert rows[0][0] == 'twins-pcpvt-small_8xb128_in1k (64x64)'


def test_amp_speedup_times_both_precisions():
    result = run_tool(BENCHMARK, 'pcpvt-s', '--amp-speedup', '--compare',
                      '--impls', 'mmtnt', 'timm', *QUICK)
    assert result.returncode == 0
    assert 'autocast torch.bfloat16 against float32' in result.stdout
    rows = table_rows(result.stdout)
    assert [row[1] for row in rows] == ['mmtnt', 'timm']
    for row in rows:
        cells = row[2:]
        assert len(cells) == 6
        for fp32, amp, speedup in (cells[:3], cells[3:]):
            assert float(fp32.split()[0]) > 0 and float(amp.split()[0]) > 0
            assert float(speedup.split()[0]) > 0


def test_memory_sees_the_tensor_gelu_mlp_does_not_keep():
    """A train step of an MLP over 16384 tokens of hidden width 512 (32 MiB
    per hidden tensor) needs one such tensor less with gelu_mlp (in a
    process of its own: malloc gives freed memory back there)."""
    script = textwrap.dedent("""
        import contextlib
        import torch
        from mmtnt.accel import accelerate_for_cpu, release_freed_memory
        from mmtnt.accel.modules import CpuMlp
        from mmtnt.analysis import train_step_memory
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


@pytest.mark.parametrize('args, message', [
    (['no-such-model'], "Unknown benchmark 'no-such-model'"),
    (['configs/none.py'], 'config file not found'),
    (['svt-s', '--img-size', '1', '2', '3'], '--img-size takes one'),
    (['svt-s', '--amp-dtype', 'float16'], '--amp-dtype needs --amp'),
    (['svt-s', '--rounds', '0'], '--rounds must be positive'),
    (['svt-s', '--amp-speedup', '--amp'], 'leave out --amp'),
])
def test_bad_input_says_what_is_allowed(capsys, args, message):
    with pytest.raises(SystemExit) as error:
        benchmark_main(args)
    assert message in str(error.value) + capsys.readouterr().err


def test_list_names_every_variant(capsys):
    benchmark_main(['--list'])
    names = [
        line.split(':')[0] for line in capsys.readouterr().out.splitlines()
    ]
    assert names == [
        'tnt-s', 'tnt-b', 'pyramidtnt-ti', 'pyramidtnt-s', 'pyramidtnt-m',
        'pyramidtnt-b', 'pcpvt-s', 'pcpvt-b', 'pcpvt-l', 'svt-s', 'svt-b',
        'svt-l'
    ]
