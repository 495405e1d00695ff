"""Running the command-line tools as a user does, for the demo tests."""
import importlib.util
import os
import os.path as osp
import subprocess
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def run_tool(args, timeout):
    """Run ``python tools/...`` from the repository root with the
    interpreter of the tests; return the result and the wall time in
    seconds."""
    env = dict(os.environ)
    # One compute thread: PyTorch's OpenMP threads spin while they wait, so
    # two threads on a 2-core machine that is busy with anything else run
    # several times slower than one. MMTNT_TEST_THREADS overrides this.
    env['OMP_NUM_THREADS'] = os.environ.get('MMTNT_TEST_THREADS', '1')
    env['PYTHONWARNINGS'] = 'ignore'
    start = time.monotonic()
    result = subprocess.run([sys.executable, *args],
                            cwd=ROOT,
                            env=env,
                            capture_output=True,
                            text=True,
                            timeout=timeout)
    return result, time.monotonic() - start


def describe(result):
    """The tail of a failed tool's output, for assertion messages."""
    out = (result.stdout + result.stderr)[-4000:]
    return f'exit status {result.returncode}; output ends with:\n{out}'


def load_tool_module(path):
    """Import a script under ``tools/`` (e.g.
    ``'dataset_converters/make_demo_scenes.py'``) as a module."""
    name = osp.splitext(osp.basename(path))[0]
    spec = importlib.util.spec_from_file_location(
        name, osp.join(ROOT, 'tools', path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def data_options(config, scenes):
    """``--cfg-options`` that point ``config`` at the scenes in ``scenes``."""
    if 'ade' in osp.basename(config):
        root = scenes / 'ade'
        return [
            f'{split}_dataloader.dataset.data_root={root}'
            for split in ('train', 'val', 'test')
        ]
    root = scenes / 'coco'
    ann_file = root / 'annotations' / 'instances_val.json'
    return [
        f'{split}_dataloader.dataset.data_root={root}/'
        for split in ('train', 'val', 'test')
    ] + [f'{split}_evaluator.ann_file={ann_file}' for split in ('val', 'test')]
