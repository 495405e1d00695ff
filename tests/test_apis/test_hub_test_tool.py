"""``python tools/test.py configs/twins/twins-svt-small_8xb128_in1k.py
mmtnt://twins-svt-small_8xb128_in1k``: the published address (timm's
``model.safetensors`` on the Hugging Face hub) served from 127.0.0.1, as a
user runs it; the cached checkpoint is what the manual steps make."""
import pickle

import pytest
import torch
from test_tools.tool_utils import REPO, run_tool, write_images

from mmtnt import hub
from mmtnt.converters import convert_twins

timm = pytest.importorskip('timm')
safetensors_torch = pytest.importorskip('safetensors.torch')

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


def test_tools_test_py_loads_by_name(weights_server, tmp_path):
    source = timm.create_model('twins_svt_small', pretrained=False).eval()
    state_dict = source.state_dict()
    _, published = hub.resolve(NAME)
    weights_server.add(published['url'],
                       safetensors_torch.save(state_dict))
    write_images(tmp_path / 'data', 4, seed=0)
    config = tmp_path / 'config.py'
    config.write_text(CONFIG.format(root=tmp_path / 'data'))

    result = run_tool('test.py', config, f'mmtnt://{NAME}', '--work-dir',
                      tmp_path / 'work', '--out', tmp_path / 'preds.pkl')
    assert result.returncode == 0
    with open(tmp_path / 'preds.pkl', 'rb') as f:
        preds = pickle.load(f)
    assert [p['pred_score'].shape for p in preds] == [(1000, )] * 4
    assert sum(weights_server.requests.values()) == 1

    # the manual steps: download, then tools/model_converters/twins2mmtnt.py
    manual = convert_twins(state_dict)['state_dict']
    cached = torch.load(hub.fetch_checkpoint(NAME), weights_only=True)
    assert cached['state_dict'].keys() == manual.keys()
    for key, value in manual.items():
        assert torch.equal(cached['state_dict'][key], value), key
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
