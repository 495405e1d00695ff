"""mmtnt.apis.FeatureExtractor: every family's maps where its backbone
declares them, from arrays and image files."""
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from PIL import Image
from tiny_backbones import (PYRAMID_TNT_TINY, SVT_TINY, TINY_BACKBONES,
                            TNT_TINY, TWINS_TINY)

from mmtnt.apis import FeatureExtractor

FM_DEMO = str(
    Path(__file__).parents[2] / 'configs' / 'demo' /
    'tnt-demo_1xb128_fashion-mnist.py')
# The tiny archs of tests/tiny_backbones.py, as config dicts.
BACKBONES = {
    'TNT': dict(type='mmtnt.TNT', arch=TNT_TINY, img_size=64),
    'PyramidTNT': dict(
        type='mmtnt.PyramidTNT', arch=PYRAMID_TNT_TINY, img_size=128),
    'PCPVT': dict(type='mmtnt.PCPVT', arch=TWINS_TINY),
    'SVT': dict(type='mmtnt.SVT', arch=SVT_TINY),
}
# Not a multiple of any stride: the maps round up (padded inputs).
HEIGHT, WIDTH = 70, 100


def classifier_config(backbone):
    """A classifier config around ``backbone`` whose test pipeline keeps
    the input size; pixels are normalised to [-1, 1]."""
    return Config(
        dict(
            default_scope='mmpretrain',
            model=dict(
                type='ImageClassifier',
                backbone=backbone,
                head=dict(
                    type='LinearClsHead', num_classes=2, in_channels=8)),
            data_preprocessor=dict(
                num_classes=2, mean=[127.5] * 3, std=[127.5] * 3),
            test_dataloader=dict(
                dataset=dict(
                    type='CustomDataset', pipeline=[dict(type='PackInputs')
                                                    ]))))


def test_every_family_is_checked():
    assert set(BACKBONES) == set(TINY_BACKBONES)


@pytest.mark.parametrize('family', sorted(BACKBONES))
def test_maps_where_the_backbone_declares_them(family):
    num_stages = len(TINY_BACKBONES[family]().stage_token_grids(1, 1))
    out_indices = tuple(range(num_stages))
    extractor = FeatureExtractor(
        classifier_config(
            dict(
                BACKBONES[family],
                out_indices=out_indices,
                out_type='featmap')),
        pretrained=False,
        device='cpu')
    images = np.random.default_rng(0).integers(
        0, 256, (2, HEIGHT, WIDTH, 3), dtype=np.uint8)

    feats = extractor(list(images), batch_size=2, stage='backbone')

    backbone = extractor.model.backbone
    grids = backbone.token_grids(HEIGHT, WIDTH)
    assert len(grids) == num_stages
    assert len(feats) == 2 and all(len(maps) == num_stages for maps in feats)
    for grid, feat in zip(grids, feats[0]):
        assert feat.shape == (grid.channels, -(-HEIGHT // grid.stride),
                              -(-WIDTH // grid.stride))
        assert (grid.channels, *grid.hw) == feat.shape
    # The maps are the backbone's on the normalised image.
    pixels = torch.from_numpy(images[1]).permute(2, 0, 1)[None].float()
    with torch.no_grad():
        expected = backbone((pixels - 127.5) / 127.5)
    for got, want in zip(feats[1], expected):
        torch.testing.assert_close(got, want[0])


def test_demo_config_from_a_file_with_class_tokens(tmp_path):
    """The Fashion-MNIST demo: a grayscale PNG, resized to 32x32 by the
    config's pipeline (no data needed); TNT's class token (its default
    ``out_type``) and the maps of the same blocks."""
    path = tmp_path / 'item.png'
    Image.fromarray(
        np.random.default_rng(0).integers(0, 256, (28, 28),
                                          dtype=np.uint8)).save(path)
    tokens = FeatureExtractor(
        FM_DEMO,
        pretrained=False,
        device='cpu',
        backbone=dict(out_indices=(1, 3)))(str(path), stage='backbone')[0]
    extractor = FeatureExtractor(
        FM_DEMO,
        pretrained=False,
        device='cpu',
        backbone=dict(out_indices=(1, 3), out_type='featmap'))
    maps = extractor(str(path), stage='backbone')[0]

    grids = extractor.model.backbone.token_grids(32, 32)
    assert [t.shape for t in tokens] == [(g.channels, ) for g in grids]
    assert [m.shape for m in maps] == [(g.channels, *g.hw) for g in grids]
    assert [g.hw for g in grids] == [(4, 4)] * 2


def test_names_are_mmtnt_model_index_names():
    """A name goes to mmtnt's index, not mmpretrain's."""
    with pytest.raises(ValueError, match="No model 'resnet50_8xb32_in1k' in "
                       "mmtnt's model index"):
        FeatureExtractor('resnet50_8xb32_in1k', pretrained=False)
