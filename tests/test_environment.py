"""The installed stack is the one mmtnt is built for, with mmcv's ops, and
the demo data the set-up installs."""
import importlib
import importlib.util
import os.path as osp

import pytest
import torch


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


def test_pinned_versions():
    import mmcv
    import mmdet
    import mmengine
    import mmpretrain
    import mmseg
    versions = {
        'torch': torch.__version__.split('+')[0],
        'mmengine': mmengine.__version__,
        'mmcv': mmcv.__version__,
        'mmpretrain': mmpretrain.__version__,
        'mmdet': mmdet.__version__,
        'mmseg': mmseg.__version__,
    }
    assert versions == {
        'torch': '2.13.0',
        'mmengine': '0.10.7',
        'mmcv': '2.1.0',
        'mmpretrain': '1.2.0',
        'mmdet': '3.3.0',
        'mmseg': '1.2.2',
    }


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
