"""Checks of ``tools/visualization/vis_cam.py`` and
:mod:`mmtnt.visualization`, which does its work.

* The tool run as a user does, on the Fashion-MNIST demo config with a
  checkpoint of seeded initial weights and a drawn 28x28 grayscale image.
* In-process, for tiny archs of the four backbones at two input sizes (one
  of which the backbone pads): the CAM has the image's size, lies in
  [0, 1], is a real map, and draws to a PNG of the same size.
* The token layout: sentence and stage tokens land on the right cells
  (rows and columns not swapped, TNT's class token dropped), and maps of a
  padded input are resampled onto the image.
"""
import mmcv
import numpy as np
import pytest
import torch
from demo_runs import describe, run_tool
from mmengine.config import Config
from mmpretrain.models import ImageClassifier, LinearClsHead
from tiny_backbones import TINY_BACKBONES

from mmtnt.visualization import (CAMReshape, blend_cam, build_classifier,
                                 compute_cam, crop_to_image,
                                 default_target_layers, load_image,
                                 resolve_layer)
from mmtnt.visualization.cli import main

DEMO_CONFIG = 'configs/demo/tnt-demo_1xb128_fashion-mnist.py'
# Two input sizes (H, W) per family: one a multiple of every stride, one
# that the backbone pads. Large enough for each family's spatial reduction
# and to give the last stage more than one token.
SIZES = {
    'TNT': [(64, 64), (72, 88)],
    'PyramidTNT': [(128, 128), (136, 120)],
    'PCPVT': [(96, 96), (100, 132)],
    'SVT': [(96, 96), (100, 132)],
}
NUM_CLASSES = 5


def tiny_classifier(family, **kwargs):
    """An ImageClassifier with a seeded tiny backbone of ``family``."""
    torch.manual_seed(0)
    backbone = TINY_BACKBONES[family](**kwargs)
    backbone.init_weights()
    dims = backbone.embed_dims
    dims = dims[-1] if isinstance(dims, list) else dims
    head = LinearClsHead(num_classes=NUM_CLASSES, in_channels=dims)
    return ImageClassifier(backbone=backbone, head=head).eval()


def blob_image(height, width, seed=0):
    """A normalised (1, 3, H, W) image: noise and a bright square, and the
    same as HxWx3 uint8 to draw on."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 60, (height, width, 3)).astype(np.uint8)
    img[height // 4:height // 2, width // 2:width * 3 // 4] = 230
    inputs = torch.from_numpy(img).permute(2, 0, 1)[None].float()
    return (inputs - 100) / 60, img


def drawn_fashion_image(path):
    """A 28x28 grayscale 'trousers' picture saved as a PNG."""
    img = np.zeros((28, 28), np.uint8)
    img[3:25, 8:13] = 200
    img[3:25, 15:20] = 180
    img[3:7, 8:20] = 220
    mmcv.imwrite(img, str(path))
    return img


@pytest.fixture(scope='module')
def demo_checkpoint(tmp_path_factory):
    """The demo model's seeded initial weights, in mmengine's format."""
    torch.manual_seed(0)
    model = build_classifier(Config.fromfile(DEMO_CONFIG))
    path = tmp_path_factory.mktemp('vis_cam') / 'demo_init.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, path)
    return path


def check_png(path, height, width):
    assert path.is_file(), path
    img = mmcv.imread(str(path))
    assert img.shape == (height, width, 3)
    assert img.std() > 1, 'the picture is blank'


def test_command_line_on_demo(demo_checkpoint, tmp_path):
    """The tool, run as a user does, saves the CAM of the predicted class
    on the demo's test-sized (32x32) image and prints the class."""
    image = tmp_path / 'trousers.png'
    drawn_fashion_image(image)
    out = tmp_path / 'out' / 'cam.png'
    result, _ = run_tool([
        'tools/visualization/vis_cam.py',
        str(image), DEMO_CONFIG,
        str(demo_checkpoint), '--save-path',
        str(out)
    ],
                         timeout=120)
    assert result.returncode == 0, describe(result)
    assert 'backbone.blocks[3].outer.norm1' in result.stdout, describe(result)
    assert 'Target category: ' in result.stdout, describe(result)
    assert ', score 0.' in result.stdout, describe(result)
    check_png(out, 32, 32)


def test_main_options_and_errors(demo_checkpoint, tmp_path, capsys):
    """Several categories give one PNG each, other methods work, and bad
    target layers or a detector config stop with a clear message."""
    image = tmp_path / 'trousers.png'
    drawn_fashion_image(image)
    common = [str(image), DEMO_CONFIG, str(demo_checkpoint)]
    main(common + [
        '--method', 'EigenCAM', '--target-category', '1', '7',
        '--target-layers', 'backbone.blocks[-2].outer', '--save-path',
        str(tmp_path / 'cam.png')
    ])
    out = capsys.readouterr().out
    assert 'Target category: 1 (Trouser)' in out
    assert 'Target category: 7 (Sneaker)' in out
    for category in (1, 7):
        check_png(tmp_path / f'cam_{category}.png', 32, 32)
    main(common + [
        '--method', 'gradcam++', '--aug-smooth', '--eigen-smooth',
        '--save-path',
        str(tmp_path / 'smooth.png')
    ])
    assert 'Target category: ' in capsys.readouterr().out
    check_png(tmp_path / 'smooth.png', 32, 32)

    with pytest.raises(SystemExit, match=r'backbone\.blocks\[-1\]\.outer '
                       r'has no submodule .norm3.*backbone\.blocks\[-1\]'
                       r'\.outer\.norm1'):
        main(common + ['--target-layers', 'backbone.blocks[-1].outer.norm3'])
    with pytest.raises(SystemExit, match='has 4 items'):
        main(common + ['--target-layers', 'backbone.blocks[4]'])
    with pytest.raises(SystemExit, match='returns a tuple'):
        main(common + ['--target-layers', 'backbone.blocks[0]'])
    with pytest.raises(SystemExit, match='out of range'):
        main(common + ['--target-category', '10'])
    detector = 'configs/demo/retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
    with pytest.raises(SystemExit, match='image classifiers'):
        main([str(image), detector, str(demo_checkpoint)])


def test_load_image_uses_test_pipeline():
    """A grayscale picture becomes the demo's 1-channel, normalised,
    resized input; the picture to draw on is its resized copy in BGR."""
    torch.manual_seed(0)
    cfg = Config.fromfile(DEMO_CONFIG)
    model = build_classifier(cfg)
    img = np.zeros((28, 28), np.uint8)
    img[:, 14:] = 255
    inputs, image = load_image(img, cfg, model)
    assert inputs.shape == (1, 1, 32, 32)
    assert image.shape == (32, 32, 3) and image.dtype == np.uint8
    assert (image[:, :, 0] == image[:, :, 2]).all()
    # normalised with the Fashion-MNIST mean and std
    assert inputs[0, 0, 0, 0].item() == pytest.approx(-72.94 / 90.02)
    assert inputs[0, 0, 0, -1].item() == pytest.approx(
        (255 - 72.94) / 90.02)


@pytest.mark.parametrize('family', sorted(TINY_BACKBONES))
def test_cam_of_every_family(family, tmp_path):
    """Default target layers give a real map of the image's size, at an
    input size that the backbone pads and one it does not."""
    model = tiny_classifier(family)
    layers = default_target_layers(model)
    assert len(layers) == 1
    resolve_layer(model, layers[0])
    for height, width in SIZES[family]:
        inputs, img = blob_image(height, width)
        cams, categories, scores = compute_cam(model, inputs)
        assert cams.shape == (1, height, width)
        assert cams.dtype == np.float32
        assert cams.min() >= 0 and cams.max() <= 1
        assert cams.max() - cams.min() > 0.5, f'{family}: a flat CAM'
        with torch.no_grad():
            logits = model(inputs)
        assert categories == [int(logits.argmax())]
        assert scores[0] == pytest.approx(
            float(logits.softmax(-1).max()), rel=1e-5)
        path = tmp_path / f'{family}_{height}x{width}.png'
        mmcv.imwrite(blend_cam(img, cams[0]), str(path))
        check_png(path, height, width)


def test_default_target_layers():
    expected = {
        'TNT': 'backbone.blocks[1].outer.norm1',
        'PyramidTNT': 'backbone.norm',
        'PCPVT': 'backbone.stages[3].norm',
        'SVT': 'backbone.stages[3].norm',
    }
    for family, layer in expected.items():
        assert default_target_layers(
            tiny_classifier(family)) == [layer]


def test_tnt_tokens_after_last_attention_give_no_gradient():
    """Why TNT's default is the last sentence attention's input: with a
    class-token head, the last block's output tokens do not reach the
    score, and their Grad-CAM is empty."""
    model = tiny_classifier('TNT')
    inputs, _ = blob_image(64, 64)
    cams, _, _ = compute_cam(model, inputs, ['backbone.blocks[-1].outer'])
    assert cams.max() == 0


@pytest.mark.parametrize(
    'family, kwargs, size, grid, extra',
    [
        ('TNT', dict(out_type='avg_featmap'), (64, 96), (4, 6), 1),
        ('PyramidTNT', {}, (128, 192), (2, 3), 0),
        ('PCPVT', {}, (96, 128), (3, 4), 0),
        ('SVT', {}, (96, 128), (3, 4), 0),
    ])
def test_gradcam_is_class_activation_mapping(family, kwargs, size, grid,
                                             extra):
    """With average pooling and a linear head, Grad-CAM at the pooled norm
    is the class activation mapping: each token's contribution to the
    score, ``relu(w_k . token)``. Computed here from the tokens laid on the
    row-major grid, it must match the tool's map pixel for pixel."""
    from pytorch_grad_cam.utils.image import scale_cam_image
    model = tiny_classifier(family, **kwargs)
    layer = resolve_layer(model, default_target_layers(model)[0])
    inputs, _ = blob_image(*size)
    outputs = []
    handle = layer.register_forward_hook(lambda m, a, out: outputs.append(
        out.detach()))
    with torch.no_grad():
        category = int(model(inputs).argmax())
    handle.remove()
    tokens = outputs[0][0, extra:]
    weight = model.head.fc.weight[category].detach()
    contribution = (tokens @ weight).relu().reshape(grid).numpy()
    expected = scale_cam_image(contribution[None], size[::-1])
    expected = scale_cam_image(expected)
    cams, categories, _ = compute_cam(model, inputs)
    assert categories == [category]
    assert expected.max() > 0.5
    np.testing.assert_allclose(cams, expected, atol=1e-4)


def pattern_tokens(grid, extra, channels=3):
    """Tokens (1, extra + h*w, channels) whose cell (r, c) holds r in
    channel 0 and c in channel 1; extra tokens hold -100."""
    h, w = grid
    rows, cols = torch.meshgrid(
        torch.arange(h), torch.arange(w), indexing='ij')
    cells = torch.stack([rows, cols, rows * 0 + 7], dim=-1).float()
    tokens = cells.reshape(1, h * w, channels)
    return torch.cat([torch.full((1, extra, channels), -100.), tokens], 1)


@pytest.mark.parametrize(
    'family, size, grid, extra',
    [
        # TNT's sentences: the class token, then 3x5 sentences of 16 px
        ('TNT', (48, 80), (3, 5), 1),
        # stage 2 of PCPVT (stride 16) on 64x96 pixels
        ('PCPVT', (64, 96), (4, 6), 0),
        # stage 1 of PyramidTNT (stride 16) on 48x80 pixels
        ('PyramidTNT', (48, 80), (3, 5), 0),
    ])
def test_reshape_places_tokens(family, size, grid, extra):
    """Tokens of a known pattern land on their cells of the map: rows and
    columns in place, the class token dropped; the grid comes from the
    size recorded at the forward."""
    model = tiny_classifier(family)
    reshape = CAMReshape(model)
    try:
        with torch.no_grad():
            model.backbone(torch.rand(1, 3, *size))
        fmap = reshape(pattern_tokens(grid, extra))
    finally:
        reshape.remove()
    rows, cols = torch.meshgrid(
        torch.arange(grid[0]), torch.arange(grid[1]), indexing='ij')
    assert fmap.shape == (1, 3, *grid)
    assert torch.equal(fmap[0, 0], rows.float())
    assert torch.equal(fmap[0, 1], cols.float())
    assert (fmap[0, 2] == 7).all()
    # A map (B, C, h, w) passes as it is.
    assert torch.equal(reshape(fmap), fmap)
    # Tokens of no grid of this input are refused with the known grids.
    with pytest.raises(ValueError, match='on a grid of'):
        reshape(pattern_tokens((grid[0] + 1, grid[1]), extra))


def test_reshape_follows_input_size():
    """The same layer on another input size gives that size's grid."""
    model = tiny_classifier('TNT')
    reshape = CAMReshape(model)
    try:
        for (height, width), grid in [((64, 64), (4, 4)), ((32, 96), (2, 6)),
                                      ((40, 72), (3, 5))]:
            with torch.no_grad():
                model.backbone(torch.rand(1, 3, height, width))
            assert reshape(pattern_tokens(grid, 1)).shape[-2:] == grid
    finally:
        reshape.remove()


def test_crop_to_image():
    """A map of a padded input is resampled onto the image: each cell then
    holds the value at its centre on the image."""
    # 4 columns of 8 pixels (centres 4, 12, 20, 28) over a 28-pixel image
    # padded to 32; 2 rows of 8 pixels, not padded.
    centres = torch.arange(4.) * 8 + 4
    fmap = centres.view(1, 1, 1, 4).expand(2, 3, 2, 4).contiguous()
    out = crop_to_image(fmap, 8, (16, 28))
    assert out.shape == fmap.shape
    # New centres at 3.5, 10.5, 17.5, 24.5; the first lies beyond the first
    # old centre and takes its value.
    expected = torch.tensor([4., 10.5, 17.5, 24.5])
    assert torch.allclose(out, expected.expand_as(out), atol=1e-5)
    # Nothing is padded: the map is returned as it is.
    assert crop_to_image(fmap, 8, (16, 32)) is fmap
