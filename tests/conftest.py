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


@pytest.fixture(scope='session')
def demo_scenes(tmp_path_factory):
    """The dense demos' scenes (300 training, 50 validation scenes), built
    once by ``tools/dataset_converters/make_demo_scenes.py``."""
    from demo_runs import load_tool_module
    script = load_tool_module('dataset_converters/make_demo_scenes.py')
    out = tmp_path_factory.mktemp('demo_scenes')
    try:
        script.build(str(out), 300, 50)
    except FileNotFoundError as err:
        pytest.skip(f'The demo scenes cannot be built: {err}')
    return out


@pytest.fixture(scope='session')
def short_runs(tmp_path_factory):
    """The demos' short training runs, each trained once per session: the
    test that checks a demo learns and those that predict with it share
    the run."""
    from demo_runs import ShortRuns
    return ShortRuns(tmp_path_factory.mktemp('short_runs'))


@pytest.fixture(scope='session')
def fashion_mnist():
    """data/fashion_mnist, prepared from the Debian package if needed."""
    from demo_runs import ROOT, load_tool_module
    prepare = load_tool_module('dataset_converters/prepare_fashion_mnist.py')
    path = os.path.join(ROOT, 'data', 'fashion_mnist')
    try:
        prepare.prepare(path)
    except FileNotFoundError as err:
        pytest.skip(f'Fashion-MNIST is not available and cannot be '
                    f'prepared: {err}')
    return path
