"""The plain models never load the CPU accelerator: ``mmtnt.accel`` is
imported only when ``mmtnt.accelerate_for_cpu`` is first used."""
import subprocess
import sys

CHECK = """
import sys
import mmtnt
import mmtnt.models
assert 'mmtnt.accel' not in sys.modules, 'importing the models loaded it'
accelerate = mmtnt.accelerate_for_cpu
assert 'mmtnt.accel' in sys.modules
from mmtnt.accel import accelerate_for_cpu
assert accelerate is accelerate_for_cpu
try:
    mmtnt.no_such_name
except AttributeError as error:
    assert 'no_such_name' in str(error)
else:
    raise AssertionError('mmtnt.no_such_name did not raise')
"""


def test_models_import_without_the_accelerator():
    result = subprocess.run([sys.executable, '-c', CHECK],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
