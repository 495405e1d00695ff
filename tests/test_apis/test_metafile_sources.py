"""The official sources of the metafiles that are web pages (Google Drive,
BaiduDisk): each model the docs give such an address for has it in the
model index, and asking for its weights gives the manual steps with that
address, the BaiduDisk extraction code included."""
import re
from pathlib import Path

import pytest

from mmtnt import hub

MODEL_ZOO = Path(__file__).resolve().parents[2] / 'docs' / 'model_zoo.md'
# docs/model_zoo.md's rows of the official Twins UperNets and of PyramidTNT:
# (address, extraction code or '', config name, which is the model name)
ROWS = {
    'twins-upernet': re.compile(
        r'\| UperNet [^|]+\| Meituan[^|]*: (https://drive\.google\.com/\S+)'
        r'()[^|]*\|[^|]+\| `configs/twins/([^`]+)\.py`'),
    'pyramid-tnt': re.compile(
        r'\| PyramidTNT-\w+ \| Huawei: BaiduDisk (https://pan\.baidu\.com/'
        r'\S+), password (\w+) \|[^|]+\| `configs/pyramid_tnt/([^`]+)\.py`'),
}


@pytest.mark.parametrize('family, count', [('twins-upernet', 6),
                                           ('pyramid-tnt', 4)])
def test_page_sources_give_the_manual_steps(family, count, tmp_path,
                                            monkeypatch):
    monkeypatch.setenv('MMTNT_HOME', str(tmp_path))
    rows = ROWS[family].findall(MODEL_ZOO.read_text())
    assert len(rows) == count
    for url, code, name in rows:
        _, source = hub.resolve(name)
        assert source['name'] == 'official'
        if code:  # BaiduDisk fills the extraction code in from ?pwd=
            url = f'{url}?pwd={code}'
        assert source['url'] == url
        with pytest.raises(hub.HubError) as error:
            hub.fetch_checkpoint(name)
        message = str(error.value)
        assert f'open {url} in a browser' in message, message
        assert f'load checkpoints/{name}.pth in place of' in message
        assert 'train it' not in message
