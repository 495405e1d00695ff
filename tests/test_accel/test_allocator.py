"""keep_freed_memory makes glibc reuse freed memory without page faults;
release_freed_memory gives it back (each case in its own process, as the
settings are process-wide)."""
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith('linux'), reason="glibc's malloc")

SCRIPT = textwrap.dedent("""
    import resource
    import sys
    import torch
    from mmtnt.accel import keep_freed_memory, release_freed_memory

    setting = {'keep': keep_freed_memory, 'release': release_freed_memory}
    assert setting[sys.argv[1]]()

    def page_faults_of_an_allocation():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.ones(64, 2**20 // 4)  # 64 MiB, freed at once
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    page_faults_of_an_allocation()  # the first one faults either way
    print(min(page_faults_of_an_allocation() for _ in range(3)))
""")


def page_faults(setting):
    result = subprocess.run([sys.executable, '-c', SCRIPT, setting],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return int(result.stdout.split()[-1])


def test_kept_memory_is_reused_without_page_faults():
    # 64 MiB are 16384 pages of 4 KiB: kept, almost none fault again.
    assert page_faults('keep') < 200


def test_released_memory_faults_again():
    assert page_faults('release') > 8000
