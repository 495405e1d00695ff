import os
import sys

import pytest
import torch

# Tests run the helpers next to them (``equivalence``) as plain modules.
sys.path.insert(0, os.path.dirname(__file__))
# Keep timings comparable and runs reproducible on the 2-core CI machine.
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(autouse=True)
def restore_default_scope():
    """Give every test the default scope it started with.

    Tests that build through a library's scope call ``init_default_scope``,
    which stays in force after them; building an mmpretrain model through
    ``mmpretrain.registry`` in a later test then fails under a leftover
    ``mmdet`` scope. mmengine's own ``overwrite_default_scope`` restores the
    scope the same way.
    """
    from mmengine.registry import DefaultScope
    instances = DefaultScope._instance_dict.copy()
    yield
    DefaultScope._instance_dict = instances
