import os
import sys

import pytest

# Under pytest-xdist (the README's ``make test`` runs a worker per core),
# each worker computes on one thread, and so do the processes it starts
# (the tools, torchrun's ranks): PyTorch's OpenMP threads spin while they
# wait for a core, and two workers of two threads each on two cores run
# several times slower than one thread each. Set before torch is imported.
XDIST_WORKER = os.environ.get('PYTEST_XDIST_WORKER')
if XDIST_WORKER:
    os.environ['OMP_NUM_THREADS'] = '1'
    os.environ['MKL_NUM_THREADS'] = '1'

import torch  # noqa: E402

# Tests run the helpers next to them (``equivalence``) as plain modules.
sys.path.insert(0, os.path.dirname(__file__))
# ``benchmarks`` lives at the repository root, outside the installed package.
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
# Keep timings comparable and runs reproducible on the 2-core CI machine.
torch.set_num_threads(
    1 if XDIST_WORKER else max(1, min(2, os.cpu_count() or 1)))


def pytest_addoption(parser):
    parser.addoption(
        '--long', action='store_true',
        help='also run the tests marked long (minutes each; make test-long)')


def pytest_collection_modifyitems(config, items):
    """Skip the ``long`` tests unless ``--long`` is given, and run the
    ``slow`` tests first (in their order), then the rest.

    Under ``--dist loadgroup`` the workers take the tests in this order, so
    the long runs start at once and the short tests fill in around them
    instead of one long test finishing alone at the end.
    """
    if not config.getoption('long'):
        skip = pytest.mark.skip(
            reason='a long check (minutes): make test-long runs it')
        for item in items:
            if item.get_closest_marker('long'):
                item.add_marker(skip)
    items.sort(key=lambda item: item.get_closest_marker('slow') is None)


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


def fashion_mnist_missing(reason):
    """Stop a test that needs Fashion-MNIST, which is missing.

    Under CI (the ``CI`` environment variable set, as CI runners do), where
    ``tools/setup_env.sh`` was meant to install the data, the test fails;
    elsewhere it is skipped. Either way the message says what is missing
    and how the set-up installs it.

    Args:
        reason (str | Exception): What is missing.

    Raises:
        pytest.fail.Exception: Under CI.
        pytest.skip.Exception: Elsewhere.
    """
    from demo_runs import setup_missing
    setup_missing(
        f'Fashion-MNIST is missing: {reason} tools/setup_env.sh (make setup) '
        'installs it from the Debian package dataset-fashion-mnist when '
        'apt-get is usable as root; see docs/datasets.md.')


@pytest.fixture(scope='session')
def fashion_mnist_source():
    """The folder of the Fashion-MNIST idx files that the Debian package
    installs (:func:`fashion_mnist_missing` without them)."""
    from mmtnt.datasets.fashion_mnist import FILES, find_source, package_dirs
    folders = list(dict.fromkeys(package_dirs()))
    for folder in folders:
        if all(find_source(name, [folder]) for name in FILES):
            return folder
    fashion_mnist_missing(f'the idx files are not in {", ".join(folders)}.')


@pytest.fixture(scope='session')
def demo_scenes(tmp_path_factory, fashion_mnist_source):
    """The dense demos' scenes (300 training, 50 validation scenes), built
    once per session by :func:`mmtnt.datasets.demo_scenes.build` (what
    ``tools/dataset_converters/make_demo_scenes.py`` runs), in a folder
    every pytest-xdist worker shares."""
    from demo_runs import build_once, session_folder

    from mmtnt.datasets import demo_scenes
    out = session_folder(tmp_path_factory) / 'demo_scenes'

    def build(folder):
        demo_scenes.build(str(folder), 300, 50, src=fashion_mnist_source)

    build_once(out, build)
    return out


@pytest.fixture(scope='session')
def short_runs(tmp_path_factory):
    """The demos' short training runs, each trained once per session (and
    once for all pytest-xdist workers): the test that checks a demo learns
    and those that predict with it share the run."""
    from demo_runs import ShortRuns, session_folder
    return ShortRuns(session_folder(tmp_path_factory) / 'short_runs')


@pytest.fixture(scope='session')
def fashion_mnist():
    """data/fashion_mnist, prepared from the Debian package if needed."""
    from demo_runs import ROOT

    from mmtnt.datasets.fashion_mnist import prepare
    path = os.path.join(ROOT, 'data', 'fashion_mnist')
    try:
        prepare(path)
    except FileNotFoundError as err:
        fashion_mnist_missing(err)
    return path
