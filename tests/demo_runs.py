"""Running the command-line tools as a user does, for the demo tests."""
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
