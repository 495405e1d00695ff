"""``mmtnt.apis.list_models``, ``get_model`` and ``inference_model`` over
the model index, as mmpretrain's work: the three tasks, random weights, a
served file, names in any case, published weights by default in
``inference_model`` and the built model used as it is; and ``init_model``,
the builder that ``get_model`` and ``mmtnt.deploy.build_model`` share:
under the config's scope, none left behind, a bad checkpoint refused
before anything is built."""
from pathlib import Path

import mmcv
import numpy as np
import pytest
import safetensors.torch
import torch
import yaml
from equivalence import max_relative_error, timm_tiny_tnt
from mmengine.dataset import Compose, pseudo_collate
from mmengine.model import BaseModel
from mmengine.registry import DefaultScope

from mmtnt import hub
from mmtnt.accel import is_accelerated
from mmtnt.apis import (get_model, inference_model, init_model, list_models,
                        model_config)
from mmtnt.deploy import build_model
from mmtnt.utils import CheckpointFileError

REPO = Path(__file__).resolve().parents[2]
TNT_CONFIG = REPO / 'tests' / 'data' / 'configs' / 'tnt_tiny_cls.py'
SEG_CONFIG = REPO / 'tests' / 'data' / 'configs' / 'tnt_tiny_seg.py'
DET_CONFIG = REPO / 'configs' / 'demo' / \
    'retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'
TIMM_URL = 'https://huggingface.co/timm/tiny/resolve/main/model.safetensors'


def metafile_names():
    names = []
    for path in sorted((REPO / 'configs').glob('*/metafile.yml')):
        models = yaml.safe_load(path.read_text())['Models']
        names += [model['Name'] for model in models]
    return names


def tnt_entry(name, sources):
    """A model index entry of ``tnt_tiny_cls.py`` with these sources."""
    return dict(name=name, config=str(TNT_CONFIG), family='TNT',
                tasks=['Image Classification'], sources=sources)


def random_image(size):
    return np.random.default_rng(0).integers(0, 255, (size, size, 3),
                                             np.uint8)


@pytest.fixture
def built_models(monkeypatch):
    """The classes of the models (``BaseModel``) built during the test."""
    built = []
    init = BaseModel.__init__

    def recording_init(self, *args, **kwargs):
        built.append(type(self).__name__)
        init(self, *args, **kwargs)

    monkeypatch.setattr(BaseModel, '__init__', recording_init)
    return built


def test_list_models_names_patterns_and_tasks():
    names = list_models()
    assert names == sorted(metafile_names())
    assert list_models('twins-svt-small') == ['twins-svt-small_8xb128_in1k']
    # in any case, as mmpretrain's list_models
    assert list_models('Twins-SVT-Small') == ['twins-svt-small_8xb128_in1k']
    assert list_models('*SVT-S*', ['*mmseg', '*layer-decay'],
                       'Semantic Segmentation') == [
                           'fpn_twins-svt-s_8xb2-80k_ade20k-512x512',
                           'upernet_twins-svt-s_8xb2-160k_ade20k-512x512'
                       ]
    assert list_models('twins-svt', exclude_patterns='twins-svt-l') == [
        'twins-svt-base_8xb128_in1k', 'twins-svt-small_8xb128_in1k'
    ]
    classifiers = list_models(task='Image Classification')
    assert classifiers == list_models(task='mmpretrain')
    assert 'tnt-s-p16_16xb64_in1k' in classifiers
    assert all(not n.startswith(('retinanet', 'upernet')) for n in classifiers)
    detectors = list_models(task='mmdet')
    assert 'retinanet_twins-svt-s_fpn_1x_coco' in detectors
    assert 'mask-rcnn_tnt-s-p16_fpn_1x_coco' in list_models(
        task='Instance Segmentation')
    segmentors = list_models('upernet', task='mmseg')
    assert segmentors and all(n.startswith('upernet') for n in segmentors)
    assert set(classifiers) | set(detectors) | set(
        list_models(task='mmseg')) == set(names)
    assert list_models('no-such-model') == []


def test_get_model_by_name_with_random_weights(model_index):
    model_index['tnt-tiny'] = tnt_entry('tnt-tiny', [])
    model = get_model('TNT-Tiny', head=dict(num_classes=3))
    assert not model.training
    assert model.head.fc.out_features == 3
    assert model.cfg.model.head.num_classes == 3
    out = model(torch.rand(1, 3, 32, 32), mode='tensor')
    assert out.shape == (1, 3)
    with pytest.raises(ValueError, match='list_models'):
        get_model('no-such-model')


def test_a_model_without_weights_warns(model_index, built_models):
    """``inference_model`` by name asks for the published weights; with
    none (no sources, no ``load_from``) it warns and predicts with the
    initialised weights, building the model once."""
    model_index['tnt-tiny'] = tnt_entry('tnt-tiny', [])
    with pytest.warns(UserWarning, match='initialised'):
        prediction = inference_model('tnt-tiny', random_image(32))
    assert prediction['pred_scores'].shape == (2, )
    assert built_models == ['ImageClassifier']


def test_get_model_pretrained_from_a_served_file(weights_server,
                                                 model_index):
    source = timm_tiny_tnt()
    sha256 = weights_server.add(
        TIMM_URL, safetensors.torch.save(source.state_dict()))
    model_index['tnt-tiny'] = tnt_entry(
        'tnt-tiny', [dict(name='timm', url=TIMM_URL, sha256=sha256)])
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        expected = source(images)
        by_name = get_model('tnt-tiny', pretrained=True)
        assert max_relative_error(by_name(images, mode='tensor'),
                                  expected) < 1e-5
        cached = hub.fetch_checkpoint('tnt-tiny')  # from the cache
        by_path = get_model(str(TNT_CONFIG), pretrained=cached)
        assert max_relative_error(by_path(images, mode='tensor'),
                                  expected) < 1e-5
        # the export's builder loads the same weights
        for_export = build_model(str(TNT_CONFIG), cached)
        assert max_relative_error(for_export(images, mode='tensor'),
                                  expected) < 1e-5
    assert sum(weights_server.requests.values()) == 1

    # inference_model predicts with this model (accelerated in place)
    image = random_image(32)
    prediction = inference_model(by_name, image)
    assert is_accelerated(by_name)
    with torch.no_grad():
        expected = by_name.test_step(
            dict(inputs=[torch.from_numpy(image).permute(2, 0, 1)]))
    scores = expected[0].pred_score.numpy()
    assert np.allclose(prediction['pred_scores'], scores, atol=1e-6)
    # and, given the name, with the published weights by default
    by_default = inference_model('tnt-tiny', image)
    assert np.allclose(by_default['pred_scores'], scores, atol=1e-6)
    assert sum(weights_server.requests.values()) == 1


def predict_from_file(model, path):
    """The model's ``test_step`` on an image file read by its config's
    test pipeline (annotations left out)."""
    steps = [
        step for step in model.cfg.test_dataloader.dataset.pipeline
        if step['type'] != 'LoadAnnotations'
    ]
    with DefaultScope.overwrite_default_scope(model.cfg.default_scope):
        pipeline = Compose(steps)
    with torch.no_grad():
        return model.test_step(
            pseudo_collate([pipeline(dict(img_path=str(path)))]))[0]


@pytest.mark.parametrize('config', [SEG_CONFIG, DET_CONFIG],
                         ids=['mmseg', 'mmdet'])
def test_inference_model_dense_tasks(config, tmp_path, built_models):
    """What ``inference_model`` returns is what the model's own
    ``test_step`` predicts, with the model it is given (no other built),
    accelerated in place on the CPU."""
    image = random_image(64)
    mmcv.imwrite(image, str(tmp_path / 'image.png'))
    # every box kept, so that there are detections to compare
    options = dict(test_cfg=dict(score_thr=0.0)) if config == DET_CONFIG \
        else {}
    model = get_model(str(config), **options)
    built = len(built_models)
    results = inference_model(model, [image, image])
    assert len(built_models) == built
    assert is_accelerated(model)
    expected = predict_from_file(model, tmp_path / 'image.png')
    assert len(results) == 2
    if config == SEG_CONFIG:  # mmseg gives the label map
        label_map = expected.pred_sem_seg.data[0].numpy()
        assert np.array_equal(results[1], label_map)
        assert np.array_equal(inference_model(model, image), label_map)
        sample = inference_model(model, image, return_datasamples=True)
        assert torch.allclose(sample.seg_logits.data,
                              expected.seg_logits.data, atol=1e-6)
    else:
        instances = expected.pred_instances
        assert len(instances) > 0
        assert results[1]['labels'] == instances.labels.tolist()
        assert np.allclose(results[1]['scores'], instances.scores, atol=1e-6)
        assert np.allclose(results[1]['bboxes'], instances.bboxes, atol=1e-4)


def current_scope():
    """The instance name and scope of the default scope in force (their
    objects are copies after an ``overwrite_default_scope`` block)."""
    scope = DefaultScope.get_current_instance()
    return scope and (scope.instance_name, scope.scope_name)


def test_init_model_scoped_and_checked(tmp_path, built_models):
    """``init_model`` builds under the config's scope and leaves the one in
    force; ``init_weights`` initialises as the config says; a missing
    checkpoint or another scope fails before any model is built."""
    config, checkpoint = model_config(str(TNT_CONFIG))
    assert checkpoint is None
    with DefaultScope.overwrite_default_scope('mmdet'):
        before = current_scope()
        torch.manual_seed(0)
        plain = init_model(config)
        assert current_scope() == before
        torch.manual_seed(0)
        initialised = init_model(config, init_weights=True)
        assert current_scope() == before
    assert not plain.training and plain.cfg is config
    # mmpretrain's LinearClsHead: init_cfg Normal(std=0.01), bias 0
    assert initialised.head.fc.weight.std() < 0.02 < plain.head.fc.weight.std()
    assert not initialised.head.fc.bias.any()
    assert built_models == ['ImageClassifier'] * 2

    with pytest.raises(CheckpointFileError, match='no such file'):
        init_model(config, str(tmp_path / 'missing.pth'))
    config.default_scope = 'mmengine'
    with pytest.raises(ValueError, match="default_scope must be 'mmpretrain'"):
        init_model(config)
    assert built_models == ['ImageClassifier'] * 2
