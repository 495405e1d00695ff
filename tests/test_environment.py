"""The installed stack is the one mmtnt is built for, with mmcv's ops, and
the demo data the set-up installs."""
import glob
import importlib
import importlib.util
import os.path as osp
from importlib import metadata

import pytest
import torch
from packaging.version import Version

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


@pytest.mark.parametrize('module', [
    'mmdet.models', 'mmseg.models', 'mmpretrain.models', 'mmtnt', 'torchvision'
])
def test_stack_imports(module):
    importlib.import_module(module)


def test_mmcv_compiled_ops_run_on_cpu():
    from mmcv.ops import RoIAlign, nms
    boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 11., 11.],
                          [20., 20., 30., 30.]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    _, keep = nms(boxes, scores, iou_threshold=0.5)
    assert keep.tolist() == [0, 2]
    feats = torch.arange(16.).reshape(1, 1, 4, 4)
    rois = torch.tensor([[0., 0., 0., 4., 4.]])
    pooled = RoIAlign((2, 2), spatial_scale=1., sampling_ratio=2)(feats, rois)
    assert pooled.shape == (1, 1, 2, 2)


def requirement_pins():
    """``name==version`` of every pin in ``requirements/*.txt``.

    Returns:
        dict[str, str]: Version by distribution name.
    """
    pins = {}
    for path in sorted(glob.glob(osp.join(ROOT, 'requirements', '*.txt'))):
        with open(path) as f:
            for line in f:
                name, sep, version = line.split('#')[0].strip().partition(
                    '==')
                if sep:
                    pins[name] = version
    return pins


def test_installed_versions_are_the_pinned_ones():
    """Every package requirements/ pins is installed at its pin (the
    local label, such as torch's ``+cpu``, aside)."""
    pins = requirement_pins()
    assert {'torch', 'mmcv', 'mmengine', 'mmdet'} <= pins.keys()
    installed = {
        name: Version(metadata.version(name)).public
        for name in pins
    }
    assert installed == pins


def load_tests_conftest():
    """``tests/conftest.py`` as a module, for its helpers."""
    path = osp.join(osp.dirname(__file__), 'conftest.py')
    spec = importlib.util.spec_from_file_location('tests_conftest', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('ci, outcome', [('true', pytest.fail.Exception),
                                         ('1', pytest.fail.Exception),
                                         ('', pytest.skip.Exception),
                                         ('false', pytest.skip.Exception)])
def test_missing_fashion_mnist_fails_under_ci(monkeypatch, ci, outcome):
    monkeypatch.setenv('CI', ci)
    with pytest.raises(outcome) as info:
        load_tests_conftest().fashion_mnist_missing('no idx files.')
    message = str(info.value)
    assert 'no idx files.' in message
    assert 'dataset-fashion-mnist' in message
    assert 'tools/setup_env.sh' in message


def test_fashion_mnist_is_installed(fashion_mnist_source):
    """Fails under CI, and is skipped elsewhere, without the Debian package's
    files (the ``fashion_mnist_source`` fixture)."""
    assert osp.isdir(fashion_mnist_source)
