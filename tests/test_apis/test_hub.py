"""``mmtnt://NAME``: published weights fetched from a local server,
converted, cached and loaded wherever mmengine loads a checkpoint.

The sources are random-weight models saved in each published layout: timm's
TNT and Twins (``model.safetensors`` on the Hugging Face hub, and ``.pth``),
the official TNT ``.pth.tar`` and an mmseg Twins UperNet. Nothing is
downloaded from the internet.
"""
import argparse
import io
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from equivalence import max_relative_error, official_tnt_layout, randomize_
from mmengine.config import Config
from mmengine.hub import get_config
from mmengine.registry import MODELS, DefaultScope
from mmengine.runner import load_checkpoint

from mmtnt import hub

timm = pytest.importorskip('timm')
safetensors_torch = pytest.importorskip('safetensors.torch')

REPO = Path(__file__).resolve().parents[2]
TNT_CONFIG = REPO / 'tests' / 'data' / 'configs' / 'tnt_tiny_cls.py'
TOLERANCE = 1e-5
# A 4-stage SVT small enough for a quick test; 224x224 so that the 7x7
# windows tile every stage (timm pads without masking).
SVT_ARCH = dict(
    embed_dims=[16, 32, 64, 128],
    depths=[2, 2, 2, 2],
    num_heads=[1, 2, 4, 8],
    mlp_ratios=[2, 2, 2, 2],
    sr_ratios=[8, 4, 2, 1],
    window_sizes=[7, 7, 7, 7])
SVT_CONFIG = f"""
default_scope = 'mmpretrain'
model = dict(
    type='ImageClassifier',
    backbone=dict(type='mmtnt.SVT', arch={SVT_ARCH!r}),
    neck=None,
    head=dict(type='LinearClsHead', num_classes=2, in_channels=128))
"""


def timm_tnt():
    """timm's TNT with the sizes of ``tnt_tiny_cls.py``, random weights."""
    model = timm.models.tnt.TNT(
        img_size=32, patch_size=8, embed_dim=32, inner_dim=8, depth=2,
        num_heads_inner=2, num_heads_outer=2, first_stride=2, num_classes=2)
    return randomize_(model, seed=0).eval()


def timm_svt():
    """timm's Twins-SVT with the sizes of :data:`SVT_ARCH`."""
    model = timm.models.twins.Twins(
        embed_dims=SVT_ARCH['embed_dims'], depths=SVT_ARCH['depths'],
        num_heads=SVT_ARCH['num_heads'], mlp_ratios=SVT_ARCH['mlp_ratios'],
        sr_ratios=SVT_ARCH['sr_ratios'], wss=SVT_ARCH['window_sizes'],
        num_classes=2)
    return randomize_(model, seed=0).eval()


def torch_bytes(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def safetensors_bytes(state_dict):
    return safetensors_torch.save(
        {k: v.contiguous()
         for k, v in state_dict.items()})


def build(config, init_cfg=None, **options):
    """The model of a config (eval mode), with ``options`` merged into it
    and ``init_cfg`` applied when given."""
    cfg = config if isinstance(config, Config) else Config.fromfile(config)
    cfg.merge_from_dict(options)
    if init_cfg is not None:
        cfg.model.init_cfg = init_cfg
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(cfg.model)
    if init_cfg is not None:
        model.init_weights()
    return model.eval()


def entry(name, config, family, url, sha256=None, source='timm'):
    return dict(
        name=name, config=str(config), family=family,
        tasks=['Image Classification'],
        sources=[dict(name=source, url=url, sha256=sha256)])


def cached_files(home):
    return sorted(p for p in Path(home).rglob('*') if p.is_file())


@pytest.fixture
def svt_config(tmp_path):
    path = tmp_path / 'svt_tiny_cls.py'
    path.write_text(SVT_CONFIG)
    return path


CASES = {
    # name: (family, make the source, its layout as bytes, file name)
    'tnt-timm-safetensors': ('TNT', timm_tnt, safetensors_bytes,
                             'model.safetensors'),
    'tnt-timm-pth': ('TNT', timm_tnt, torch_bytes, 'tnt.pth'),
    'tnt-official-pth-tar': ('TNT', timm_tnt,
                             lambda sd: torch_bytes(official_tnt_layout(sd)),
                             'tnt_s_81.5.pth.tar'),
    'svt-timm-safetensors': ('Twins', timm_svt, safetensors_bytes,
                             'model.safetensors'),
    'svt-timm-pth': ('Twins', timm_svt, torch_bytes, 'svt.pth'),
}


@pytest.mark.parametrize('case', list(CASES))
def test_classifier_logits_and_cache(case, weights_server, model_index,
                                     svt_config):
    """Downloaded, converted and loaded through ``init_cfg``, the weights
    give the source model's logits; the second load reads the cache."""
    family, make, layout, file_name = CASES[case]
    source = make()
    url = f'https://example.org/{case}/{file_name}'
    sha256 = weights_server.add(url, layout(source.state_dict()))
    config = TNT_CONFIG if family == 'TNT' else svt_config
    model_index[case] = entry(case, config, family, url, sha256)
    size = 32 if family == 'TNT' else 224
    images = torch.randn(2, 3, size, size,
                         generator=torch.Generator().manual_seed(0))
    init_cfg = dict(type='Pretrained', checkpoint=f'mmtnt://{case}')
    with torch.no_grad():
        expected = source(images)
        for _ in range(2):
            model = build(config, init_cfg)
            error = max_relative_error(model(images, mode='tensor'), expected)
            assert error < TOLERANCE, error
    assert weights_server.requests == {'/' + url.split('://')[1]: 1}
    home = Path(hub.cache_dir()).parent
    assert [p.name for p in cached_files(home)] == [f'{case}@timm.pth']


def test_mmseg_upernet_whole(weights_server, model_index):
    """mmseg's published Twins UperNet layout (served under its real
    address, with the hash of the served file) loads whole, as
    ``load_from`` does, into the mmtnt config the index names. The heads
    are narrowed alike on both sides (fewer channels) to keep it quick."""
    name = 'upernet_twins-svt-s_mmseg_8xb2-160k_ade20k-512x512'
    mmseg_cfg = get_config(
        'mmseg::twins/twins_svt-s_uperhead_8xb2-160k_ade20k-512x512.py')
    narrow = {
        'model.decode_head.channels': 32,
        'model.auxiliary_head.channels': 16
    }
    source = randomize_(build(mmseg_cfg, **narrow), seed=0)
    source_entry = model_index[name]['sources'][0]
    assert source_entry['name'] == 'mmseg'
    assert source_entry['sha256'] == source_entry['url'][-12:-4]
    source_entry['sha256'] = weights_server.add(
        source_entry['url'], torch_bytes({'state_dict': source.state_dict()}))

    model = build(model_index[name]['config'], **narrow)
    load_checkpoint(model, f'mmtnt://{name}', strict=True)
    images = torch.randn(1, 3, 64, 64,
                         generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        error = max_relative_error(
            model(images, mode='tensor'), source(images, mode='tensor'))
    assert error < TOLERANCE, error


def closed_port():
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


FAILURES = {
    'wrong hash': ('sha256', 'its SHA-256 is'),
    '404': ('missing', 'answered HTTP 404'),
    'truncated': ('truncated', 'truncated'),
    'unreachable host': ('closed', 'Connection refused'),
    'not a checkpoint': ('garbage', 'could not be read or converted'),
    'web page': ('drive', 'a web page, not a file'),
    'pickled arguments': ('pickled', '--allow-pickle'),
}


@pytest.mark.parametrize('failure', list(FAILURES))
def test_failures_give_one_clear_error(failure, weights_server, model_index,
                                       monkeypatch):
    """Each failure: one HubError naming the model, the address, what went
    wrong and the manual commands, no exception chain, an empty cache."""
    how, what = FAILURES[failure]
    url = 'https://example.org/tnt/model.safetensors'
    data = safetensors_bytes(timm_tnt().state_dict())
    sha256 = weights_server.add(url, data)
    if how == 'sha256':
        sha256 = '0' * 8
    elif how == 'missing':
        weights_server.files.clear()
    elif how == 'truncated':
        weights_server.truncated.add('/example.org/tnt/model.safetensors')
    elif how == 'closed':
        monkeypatch.setenv('MMTNT_WEIGHTS_MIRROR',
                           f'http://127.0.0.1:{closed_port()}')
    elif how == 'garbage':
        sha256 = weights_server.add(url, b'<html>not weights</html>')
    elif how == 'drive':
        url = 'https://drive.google.com/file/d/XYZ/view?usp=sharing'
    elif how == 'pickled':  # as official training scripts save them
        url = 'https://example.org/tnt/tnt_s_81.5.pth.tar'
        sha256 = weights_server.add(
            url, torch_bytes(dict(model={}, args=argparse.Namespace())))
    model_index['tnt-tiny'] = entry('tnt-tiny', TNT_CONFIG, 'TNT', url,
                                    sha256, source='official')
    model = build(TNT_CONFIG)
    with pytest.raises(hub.HubError) as info:
        load_checkpoint(model, 'mmtnt://tnt-tiny')
    message = str(info.value)
    print(message)
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ or info.value.__context__ is None
    assert 'tnt-tiny' in message and url in message and what in message
    assert 'tools/model_converters/tnt2mmtnt.py' in message
    assert cached_files(Path(hub.cache_dir()).parent) == []


def test_names_sources_and_defaults(model_index):
    """``NAME`` picks the first source, ``NAME@SOURCE`` another; unknown
    names and models without weights are refused with the choices."""
    _, source = hub.resolve('mmtnt://twins-svt-small_8xb128_in1k')
    assert source['url'].startswith('https://huggingface.co/timm/')
    _, source = hub.resolve('twins-svt-small_8xb128_in1k@mmpretrain')
    assert source['url'].endswith('-8fe5205b.pth')
    assert source['sha256'] == '8fe5205b'
    for name, words in [
        ('twins-svt-small_8xb128_in1k@nope', 'timm, mmpretrain, official'),
        ('no-such-model', 'list_models'),
        ('retinanet_twins-svt-s_fpn_1x_coco', 'no published weights'),
    ]:
        with pytest.raises(hub.HubError, match=words):
            hub.resolve(name)


def test_index_sources_are_well_formed():
    """Every recorded source: a known family, unique names, an https
    address, a hex SHA-256 (prefix); OpenMMLab's equals its file name's."""
    for name, model in hub.model_index().items():
        assert model['family'] in hub.FAMILIES, name
        names = [source['name'] for source in model['sources']]
        assert len(set(names)) == len(names), name
        for source in model['sources']:
            assert source['url'].startswith('https://'), (name, source)
            sha256 = source['sha256']
            if 'download.openmmlab.com' in source['url']:
                assert sha256 == source['url'][-12:-4], (name, source)
            if sha256 is not None:
                int(sha256, 16)


def test_scheme_registered_without_importing_the_runner():
    """``import mmtnt`` leaves mmengine's runner unimported; importing it
    later registers ``mmtnt://``."""
    code = ('import sys, mmtnt\n'
            "assert 'mmengine.runner' not in sys.modules\n"
            'from mmengine.runner import CheckpointLoader\n'
            "assert 'mmtnt://' in CheckpointLoader._schemes\n")
    result = subprocess.run([sys.executable, '-c', code],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
