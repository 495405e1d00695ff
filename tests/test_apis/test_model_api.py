"""``mmtnt.apis.list_models``, ``get_model`` and ``inference_model`` over
the model index: the three tasks, random weights and a served file."""
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from equivalence import max_relative_error
from test_hub import TNT_CONFIG, entry, safetensors_bytes, timm_tnt

from mmtnt import hub
from mmtnt.apis import get_model, inference_model, list_models

REPO = Path(__file__).resolve().parents[2]
SEG_CONFIG = REPO / 'tests' / 'data' / 'configs' / 'tnt_tiny_seg.py'
DET_CONFIG = REPO / 'configs' / 'demo' / \
    'retinanet_pcpvt-demo_fpn_1xb8-30e_demo-coco.py'


def metafile_names():
    names = []
    for path in sorted((REPO / 'configs').glob('*/metafile.yml')):
        models = yaml.safe_load(path.read_text())['Models']
        names += [model['Name'] for model in models]
    return names


def test_list_models_names_patterns_and_tasks():
    names = list_models()
    assert names == sorted(metafile_names())
    assert list_models('twins-svt-small') == ['twins-svt-small_8xb128_in1k']
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
    model_index['tnt-tiny'] = entry('tnt-tiny', TNT_CONFIG, 'TNT',
                                    'https://example.org/tnt.pth')
    model = get_model('tnt-tiny', head=dict(num_classes=3))
    assert not model.training
    assert model.head.fc.out_features == 3
    assert model.cfg.model.head.num_classes == 3
    out = model(torch.rand(1, 3, 32, 32), mode='tensor')
    assert out.shape == (1, 3)
    with pytest.raises(ValueError, match='list_models'):
        get_model('no-such-model')


def test_get_model_pretrained_from_a_served_file(weights_server,
                                                 model_index):
    source = timm_tnt()
    url = 'https://huggingface.co/timm/tiny/resolve/main/model.safetensors'
    sha256 = weights_server.add(url, safetensors_bytes(source.state_dict()))
    model_index['tnt-tiny'] = entry('tnt-tiny', TNT_CONFIG, 'TNT', url,
                                    sha256)
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        expected = source(images)
        by_name = get_model('tnt-tiny', pretrained=True)
        assert max_relative_error(by_name(images, mode='tensor'),
                                  expected) < 1e-5
        cached = next(Path(hub.cache_dir()).glob('tnt-tiny@timm.pth'))
        by_path = get_model(str(TNT_CONFIG), pretrained=str(cached))
        assert max_relative_error(by_path(images, mode='tensor'),
                                  expected) < 1e-5
    assert sum(weights_server.requests.values()) == 1

    # inference_model predicts with this model, not with one it builds
    image = np.random.default_rng(0).integers(0, 255, (32, 32, 3), np.uint8)
    prediction = inference_model(by_name, image)
    with torch.no_grad():
        expected = by_name.test_step(
            dict(inputs=[torch.from_numpy(image).permute(2, 0, 1)]))
    assert np.allclose(prediction['pred_scores'],
                       expected[0].pred_score.numpy(), atol=1e-6)


@pytest.mark.parametrize('config', [SEG_CONFIG, DET_CONFIG],
                         ids=['mmseg', 'mmdet'])
def test_inference_model_dense_tasks(config):
    image = np.random.default_rng(0).integers(0, 255, (64, 64, 3),
                                              dtype=np.uint8)
    model = get_model(str(config))
    results = inference_model(model, [image, image])
    assert len(results) == 2
    if 'seg' in config.name:  # mmseg gives the label map
        assert results[0].shape == (64, 64)
        assert inference_model(model, image).shape == (64, 64)
    else:
        assert {'labels', 'scores', 'bboxes'} <= set(results[0])
