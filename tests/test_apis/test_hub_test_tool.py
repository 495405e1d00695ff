"""``python tools/test.py configs/twins/twins-svt-small_8xb128_in1k.py
mmtnt://twins-svt-small_8xb128_in1k``: the published address (timm's
``model.safetensors`` on the Hugging Face hub) served from 127.0.0.1, as a
user runs it; its predictions are timm's."""
import pickle

import pytest
import safetensors.torch
import torch
from equivalence import max_relative_error, randomize_
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from mmengine.registry import DefaultScope
from mmpretrain.registry import DATASETS, MODELS
from test_tools.tool_utils import REPO, run_tool, write_images

from mmtnt import hub

NAME = 'twins-svt-small_8xb128_in1k'
# The real config, tested on four small images instead of ImageNet.
CONFIG = f"""
_base_ = '{REPO}/configs/twins/{NAME}.py'
test_dataloader = dict(
    batch_size=4,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        _delete_=True,
        type='CustomDataset',
        data_root='{{root}}',
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(type='ResizeEdge', scale=256, edge='short',
                 backend='pillow', interpolation='bicubic'),
            dict(type='CenterCrop', crop_size=224),
            dict(type='PackInputs'),
        ]))
"""


def timm_logits(config, model):
    """What ``model`` (timm's) gives on the config's test set, read and
    normalised as the config says."""
    cfg = Config.fromfile(config)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        dataset = DATASETS.build(cfg.test_dataloader.dataset)
        preprocessor = MODELS.build(
            dict(type='ClsDataPreprocessor', **cfg.data_preprocessor))
    batch = preprocessor(pseudo_collate(list(dataset)))
    with torch.no_grad():
        return model(batch['inputs'])


def centred(log_scores):
    """Log-scores less their mean: the logits, less theirs."""
    return log_scores - log_scores.mean(-1, keepdim=True)


def test_tools_test_py_loads_by_name(weights_server, tmp_path):
    """tools/test.py with ``mmtnt://NAME`` predicts what timm's model
    predicts (its logits, up to the softmax), from one download."""
    timm = pytest.importorskip('timm')
    source = timm.create_model('twins_svt_small', pretrained=False)
    source = randomize_(source, seed=0).eval()
    _, published = hub.resolve(NAME)
    weights_server.add(published['url'],
                       safetensors.torch.save(source.state_dict()))
    write_images(tmp_path / 'data', 4, seed=0)
    config = tmp_path / 'config.py'
    config.write_text(CONFIG.format(root=tmp_path / 'data'))

    result = run_tool('test.py', config, f'mmtnt://{NAME}', '--work-dir',
                      tmp_path / 'work', '--out', tmp_path / 'preds.pkl')
    assert result.returncode == 0
    with open(tmp_path / 'preds.pkl', 'rb') as f:
        preds = pickle.load(f)
    scores = torch.stack([torch.as_tensor(p['pred_score']) for p in preds])
    expected = timm_logits(config, source)
    assert scores.shape == expected.shape == (4, 1000)
    assert max_relative_error(centred(scores.log()),
                              centred(expected)) < 1e-4
    assert sum(weights_server.requests.values()) == 1


def test_tools_test_py_says_what_failed_in_one_line(weights_server,
                                                    tmp_path):
    """Nothing served: tools/test.py stops before building the runner,
    with the hub's message and no traceback."""
    write_images(tmp_path / 'data', 4, seed=0)
    config = tmp_path / 'config.py'
    config.write_text(CONFIG.format(root=tmp_path / 'data'))

    result = run_tool('test.py', config, f'mmtnt://{NAME}', '--work-dir',
                      tmp_path / 'work')
    assert result.returncode != 0
    assert 'Traceback' not in result.stderr
    assert 'tools/test.py:' in result.stderr and NAME in result.stderr
    assert 'HTTP 404' in result.stderr
