"""The torchvision stand-in for ``mmcv._ext``
(benchmarks.mmcv_ops_torchvision, which a benchmark installs in its own
process) against mmcv's compiled ops: the same NMS picks, RoIAlign outputs
and input gradients."""
import itertools
import subprocess
import sys

import pytest
import torch
from tool_utils import REPO

# A module of its own: ``mmcv._ext`` stays real.
from benchmarks import mmcv_ops_torchvision as standin

real_ext = pytest.importorskip(
    'mmcv._ext', reason='needs mmcv with compiled ops as the reference')


def random_boxes(generator, count, size):
    """``count`` boxes ``x1, y1, x2, y2`` inside ``size`` (many overlap)."""
    xy = torch.rand(count, 2, generator=generator) * size * 0.8
    wh = torch.rand(count, 2, generator=generator) * size * 0.4 + 0.5
    return torch.cat([xy, xy + wh], dim=1)


def random_rois(generator, count, batch, image_size):
    """RoIs ``(count, 5)`` in image coordinates: tiny ones (below one
    feature pixel), ones reaching past the image and ordinary ones."""
    boxes = random_boxes(generator, count, image_size)
    boxes[:count // 4, 2:] = boxes[:count // 4, :2] + torch.rand(
        count // 4, 2, generator=generator) * 3
    boxes[count // 4:count // 2] += image_size * 0.3
    index = torch.randint(0, batch, (count, 1), generator=generator)
    return torch.cat([index.float(), boxes], dim=1)


@pytest.mark.parametrize('iou_threshold', [0.3, 0.5, 0.7])
def test_nms_matches_mmcv(iou_threshold):
    generator = torch.Generator().manual_seed(int(iou_threshold * 10))
    boxes = random_boxes(generator, 300, 100.)
    scores = torch.rand(300, generator=generator)
    expected = real_ext.nms(
        boxes, scores, iou_threshold=iou_threshold, offset=0)
    kept = standin.nms(boxes, scores, iou_threshold=iou_threshold, offset=0)
    assert kept.dtype == torch.long
    # Some boxes are dropped, some kept: the comparison means something.
    assert 10 < len(expected) < 290
    assert torch.equal(kept, expected)


def test_nms_empty_and_offset():
    empty = standin.nms(torch.zeros(0, 4), torch.zeros(0), 0.5, offset=0)
    assert empty.dtype == torch.long and empty.shape == (0, )
    with pytest.raises(NotImplementedError, match='offset=1'):
        standin.nms(torch.zeros(2, 4), torch.zeros(2), 0.5, offset=1)


def run_roi_align(ext, features, rois, grad_output, output_size,
                  spatial_scale, sampling_ratio, aligned):
    """``ext``'s RoIAlign forward and backward, called as mmcv does."""
    kwargs = dict(
        aligned_height=output_size[0],
        aligned_width=output_size[1],
        spatial_scale=spatial_scale,
        sampling_ratio=sampling_ratio,
        pool_mode=1,
        aligned=aligned)
    output = features.new_zeros(
        (rois.size(0), features.size(1)) + output_size)
    argmax = features.new_zeros(0)
    ext.roi_align_forward(features, rois, output, argmax, argmax, **kwargs)
    grad_input = features.new_zeros(features.shape)
    ext.roi_align_backward(grad_output, rois, argmax, argmax, grad_input,
                           **kwargs)
    return output, grad_input


@pytest.mark.parametrize(
    'aligned, sampling_ratio, spatial_scale',
    list(itertools.product([True, False], [0, 2], [1 / 4, 1 / 16])))
def test_roi_align_matches_mmcv(aligned, sampling_ratio, spatial_scale):
    generator = torch.Generator().manual_seed(sampling_ratio +
                                              int(1 / spatial_scale))
    # RoIs up to 16 feature pixels: adaptive sampling takes 1 to 3
    # samples per side of a 7x5 bin.
    features = torch.randn(2, 3, 40, 48, generator=generator)
    image_size = 40 / spatial_scale
    rois = random_rois(generator, 24, 2, image_size)
    output_size = (7, 5)
    grad_output = torch.randn(24, 3, *output_size, generator=generator)
    args = (features, rois, grad_output, output_size, spatial_scale,
            sampling_ratio, aligned)
    expected, expected_grad = run_roi_align(real_ext, *args)
    output, grad_input = run_roi_align(standin, *args)
    assert expected.abs().sum() > 0 and expected_grad.abs().sum() > 0
    torch.testing.assert_close(output, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad_input, expected_grad, rtol=1e-5,
                               atol=1e-5)


def test_roi_align_refuses_max_pooling():
    features = torch.zeros(1, 1, 4, 4)
    rois = torch.tensor([[0., 0., 0., 4., 4.]])
    output = torch.zeros(1, 1, 2, 2)
    with pytest.raises(NotImplementedError, match="max"):
        standin.roi_align_forward(
            features, rois, output, output, output,
            aligned_height=2, aligned_width=2, spatial_scale=1.0,
            sampling_ratio=0, pool_mode=0, aligned=True)


def test_other_ops_raise_clearly():
    assert hasattr(standin, 'softnms')  # mmcv.ops' load_ext checks this
    assert not hasattr(standin, '__path__')
    with pytest.raises(NotImplementedError) as info:
        standin.deform_conv_forward(torch.zeros(1))
    message = str(info.value)
    assert "'deform_conv_forward'" in message
    assert 'no compiled ops' in message


def test_install_keeps_compiled_ops():
    # Without force, a working compiled extension stays in place.
    assert standin.install() is False
    assert sys.modules['mmcv._ext'] is real_ext


# The child, whose mmcv._ext cannot be imported (as where mmcv has no
# compiled ops), installs the stand-in before mmcv.ops is imported, then runs
# mmcv.ops' RoIAlign (forward, backward) and batched_nms on the inputs the
# parent saved, and saves what they give.
CHILD = """
import sys
import torch
from benchmarks import mmcv_ops_torchvision as standin
assert 'mmcv.ops' not in sys.modules
sys.modules['mmcv._ext'] = None  # importing it raises ImportError
assert standin.install() is True
import mmcv.ops
assert sys.modules['mmcv.ops.roi_align'].ext_module is standin
assert sys.modules['mmcv.ops.nms'].ext_module is standin
data = torch.load(sys.argv[1])
features = data['features'].requires_grad_()
layer = mmcv.ops.RoIAlign((7, 7), 1 / 4, sampling_ratio=0, aligned=True)
output = layer(features, data['rois'])
output.backward(data['grad_output'])
dets, keep = mmcv.ops.batched_nms(data['boxes'], data['scores'],
                                  data['labels'], data['nms_cfg'])
torch.save(dict(output=output.detach(), grad=features.grad, dets=dets,
                keep=keep), sys.argv[2])
"""


def test_mmcv_ops_with_standin_match_compiled_ops(tmp_path):
    import mmcv.ops
    generator = torch.Generator().manual_seed(0)
    data = dict(
        features=torch.randn(2, 4, 32, 40, generator=generator),
        rois=random_rois(generator, 32, 2, 128.),
        grad_output=torch.randn(32, 4, 7, 7, generator=generator),
        boxes=random_boxes(generator, 200, 100.),
        scores=torch.rand(200, generator=generator),
        labels=torch.randint(0, 3, (200, ), generator=generator),
        nms_cfg=dict(type='nms', iou_threshold=0.5))
    torch.save(data, tmp_path / 'inputs.pth')
    result = subprocess.run(
        [sys.executable, '-c', CHILD,
         str(tmp_path / 'inputs.pth'), str(tmp_path / 'outputs.pth')],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    got = torch.load(tmp_path / 'outputs.pth')

    features = data['features'].clone().requires_grad_()
    layer = mmcv.ops.RoIAlign((7, 7), 1 / 4, sampling_ratio=0, aligned=True)
    output = layer(features, data['rois'])
    output.backward(data['grad_output'])
    dets, keep = mmcv.ops.batched_nms(data['boxes'], data['scores'],
                                      data['labels'], data['nms_cfg'])
    assert output.abs().sum() > 0 and 10 < len(keep) < 190
    torch.testing.assert_close(got['output'], output.detach(), rtol=1e-5,
                               atol=1e-5)
    torch.testing.assert_close(got['grad'], features.grad, rtol=1e-5,
                               atol=1e-5)
    assert torch.equal(got['keep'], keep)
    torch.testing.assert_close(got['dets'], dets)
