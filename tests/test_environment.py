"""The installed stack is the one mmtnt is built for, with mmcv's ops."""
import importlib

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
