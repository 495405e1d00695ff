"""A classification checkpoint initialises the backbone of a dense model.

The documented way (docs/detection.md, docs/segmentation.md): convert a
released checkpoint with ``tools/model_converters/*2mmtnt.py`` (or take one
saved by an mmtnt classification run), then set the dense config's
``backbone.init_cfg=dict(type='Pretrained', checkpoint=...,
prefix='backbone.')``. The dense backbone has parts the classifier lacks
(PyramidTNT's upsampling, per-stage norms) and may store position terms for
another input size; everything the two share must arrive intact.
"""
import pytest
import torch
from mmengine.registry import init_default_scope
from tiny_backbones import PYRAMID_TNT_TINY, SVT_TINY, TNT_TINY, TWINS_TINY

from mmtnt.registry import MODELS

CASES = {
    'tnt': (dict(type='mmtnt.TNT', arch=TNT_TINY, img_size=64),
            dict(img_size=96, out_indices=(0, 1), out_type='featmap'), 16),
    'pyramid_tnt': (
        dict(type='mmtnt.PyramidTNT', arch=PYRAMID_TNT_TINY, img_size=64),
        dict(img_size=128, out_indices=(0, 1, 2, 3), out_type='featmap',
             upsample_featmaps=True), 32),
    # As the dense configs: no norm after any PCPVT stage, one after every
    # SVT stage.
    'pcpvt': (dict(type='mmtnt.PCPVT', arch=TWINS_TINY),
              dict(out_indices=(0, 1, 2, 3), out_type='featmap',
                   norm_after_stage=False), 32),
    'svt': (dict(type='mmtnt.SVT', arch=SVT_TINY),
            dict(out_indices=(0, 1, 2, 3), out_type='featmap',
                 norm_after_stage=True), 32),
}


@pytest.mark.parametrize('family', list(CASES))
def test_classifier_checkpoint_initialises_a_dense_backbone(family, tmp_path):
    backbone_cfg, dense_args, channels = CASES[family]
    init_default_scope('mmpretrain')
    classifier = MODELS.build(
        dict(
            type='mmpretrain.ImageClassifier',
            backbone=backbone_cfg,
            head=dict(
                type='mmpretrain.LinearClsHead',
                num_classes=5,
                in_channels=channels)))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in classifier.parameters():
            param.copy_(torch.randn(param.shape, generator=generator))
    checkpoint = tmp_path / 'classifier.pth'
    torch.save(
        dict(meta=dict(), state_dict=classifier.state_dict()), checkpoint)

    dense = MODELS.build(
        dict(
            backbone_cfg,
            **dense_args,
            init_cfg=dict(
                type='Pretrained',
                checkpoint=str(checkpoint),
                prefix='backbone.')))
    before = {k: v.clone() for k, v in dense.state_dict().items()}
    dense.init_weights()

    source = classifier.backbone.state_dict()
    loaded = dense.state_dict()
    shared = source.keys() & loaded.keys()
    # Everything of the classifier's backbone arrives (but PCPVT's final
    # norm, which its dense configs leave out) ...
    dropped = {'stages.3.norm.weight', 'stages.3.norm.bias'} \
        if family == 'pcpvt' else set()
    assert source.keys() - loaded.keys() == dropped
    resized = set()
    for key in shared:
        if source[key].shape == loaded[key].shape:
            assert torch.equal(source[key], loaded[key]), key
        else:
            resized.add(key)
    # ... position terms resized to the dense model's input size ...
    expected_resized = {
        'tnt': {'sentence_pos'},
        'pyramid_tnt': {'sentence_pos'} | {
            f'stages.{i}.relative_pos' for i in range(4)
        },
    }.get(family, set())
    assert resized == expected_resized
    # ... and the dense-only parts keep the values they were built with.
    dense_only = loaded.keys() - source.keys()
    dense_only_parts = {
        'pyramid_tnt': ('upsample0.', 'upsample1.', 'upsample2.',
                        'upsample3.'),
        'svt': ('stages.0.norm.', 'stages.1.norm.', 'stages.2.norm.'),
    }.get(family, ())
    assert {
        part
        for part in dense_only_parts for key in dense_only
        if key.startswith(part)
    } == set(dense_only_parts)
    assert all(key.startswith(dense_only_parts) for key in dense_only)
    for key in dense_only:
        assert torch.equal(loaded[key], before[key]), key
