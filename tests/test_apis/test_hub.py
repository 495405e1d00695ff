"""``mmtnt://NAME``: published weights fetched from a local server,
converted, cached and loaded wherever mmengine loads a checkpoint.

The sources are random-weight models saved in each published layout: timm's
TNT and Twins (``model.safetensors`` on the Hugging Face hub, and ``.pth``),
the official TNT ``.pth.tar`` and an mmseg Twins UperNet. Nothing is
downloaded from the internet. Also here: the hashes the server announces,
every failure as one :class:`~mmtnt.hub.HubError`, and the cache's checks
(damaged entries, one hash per process, keys, stale temporary folders,
synced writes).
test_hub_dist.py runs two ranks against one cold cache.
"""
import argparse
import ast
import errno
import hashlib
import io
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from equivalence import (max_relative_error, official_tnt_layout, randomize_,
                         timm_tiny_tnt)
from filelock import FileLock
from hub_server import TNT_CONFIG, TNT_URL, entry, safetensors_bytes, serve_tnt
from mmengine.config import Config
from mmengine.hub import get_config
from mmengine.registry import MODELS, DefaultScope
from mmengine.runner import load_checkpoint

from mmtnt import hub
from mmtnt.utils import CheckpointFileError

REPO = Path(__file__).resolve().parents[2]
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


def timm_svt():
    """timm's Twins-SVT with the sizes of :data:`SVT_ARCH`."""
    timm = pytest.importorskip('timm')
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


def cached_files(home):
    """The files under ``home`` but the entries' locks."""
    return sorted(p for p in Path(home).rglob('*')
                  if p.is_file() and p.suffix != '.lock')


def serve_like_hugging_face(server, url, data):
    """Serve ``data`` as Hugging Face serves a large file: the address
    answers with a redirect to the storage, announcing the file's SHA-256
    as ``X-Linked-Etag``.

    Returns:
        str: The SHA-256 of ``data``.
    """
    sha256 = server.add(url, data)
    path = '/' + url.split('://', 1)[1]
    storage = f'/storage/{sha256}'
    server.files[storage] = server.files.pop(path)
    server.redirects[path] = storage
    server.headers[path] = {'X-Linked-Etag': f'"{sha256}"'}
    return sha256


@pytest.fixture
def svt_config(tmp_path):
    path = tmp_path / 'svt_tiny_cls.py'
    path.write_text(SVT_CONFIG)
    return path


CASES = {
    # name: (family, source name, make the source, its layout as bytes,
    # file name)
    'tnt-timm-safetensors': ('TNT', 'timm', timm_tiny_tnt, safetensors_bytes,
                             'model.safetensors'),
    'tnt-timm-pth': ('TNT', 'timm', timm_tiny_tnt, torch_bytes, 'tnt.pth'),
    # an official release of plain tensors loads like any other file
    'tnt-official-pth-tar': ('TNT', 'official', timm_tiny_tnt,
                             lambda sd: torch_bytes(official_tnt_layout(sd)),
                             'tnt_s_81.5.pth.tar'),
    'svt-timm-safetensors': ('Twins', 'timm', timm_svt, safetensors_bytes,
                             'model.safetensors'),
    'svt-timm-pth': ('Twins', 'timm', timm_svt, torch_bytes, 'svt.pth'),
}


@pytest.mark.parametrize('case', list(CASES))
def test_classifier_logits_and_cache(case, weights_server, model_index,
                                     svt_config):
    """Downloaded as from Hugging Face (redirect, announced SHA-256),
    converted and loaded through ``init_cfg``, the weights give the source
    model's logits; the second load reads the cache, whose record gives
    the cached file's size and hash."""
    family, source_name, make, layout, file_name = CASES[case]
    source = make()
    url = f'https://example.org/{case}/{file_name}'
    sha256 = serve_like_hugging_face(weights_server, url,
                                     layout(source.state_dict()))
    config = TNT_CONFIG if family == 'TNT' else svt_config
    model_index[case] = entry(case, config, family, url, sha256,
                              source=source_name)
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
    assert weights_server.requests == {
        '/' + url.split('://')[1]: 1,
        f'/storage/{sha256}': 1
    }
    cached = Path(hub.cache_file(*hub.resolve(case)))
    assert cached.name.startswith(f'{case}@{source_name}-')
    home = Path(hub.cache_dir()).parent
    assert cached_files(home) == [cached.with_suffix('.json'), cached]
    record = json.loads(cached.with_suffix('.json').read_text())
    assert record['size'] == cached.stat().st_size
    assert record['sha256'] == hashlib.sha256(cached.read_bytes()).hexdigest()
    assert record['source_sha256'] == sha256


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
    # failure: (how, words of the message)
    'wrong hash': ('sha256', ['its SHA-256 is']),
    'wrong whole hash': ('sha256-whole', ['its SHA-256 is', 'the index']),
    'changed file, ETag': ('etag', ['the server announced']),
    'changed file, X-Linked-Etag': ('linked-etag', ['the server announced']),
    '404': ('missing', ['answered HTTP 404']),
    'truncated': ('truncated', ['truncated']),
    'chunked answer cut short': ('cut-chunked', ['truncated']),
    'unreachable host': ('closed', ['Connection refused']),
    'not a checkpoint': ('garbage', ['could not be read or converted']),
    'web page': ('drive', ['a web page, not a file']),
    'pickled arguments': ('pickled', ['argparse.Namespace', '--allow-pickle']),
}


def serve_failure(how, server, monkeypatch):
    """Serve TNT weights at an address, as ``how`` says it fails.

    Returns:
        tuple[str, str]: The address and the SHA-256 for the index.
    """
    url = TNT_URL
    path = '/example.org/tnt/model.safetensors'
    data = safetensors_bytes(timm_tiny_tnt().state_dict())
    sha256 = server.add(url, data)
    if how == 'sha256':
        sha256 = '0' * 8
    elif how == 'sha256-whole':
        sha256 = '0' * 64
    elif how == 'etag':  # the file changed after the hash was announced
        server.headers[path] = {'ETag': f'"{sha256}"'}
        server.files[path] = data[:-1] + b' '
        sha256 = None
    elif how == 'linked-etag':
        serve_like_hugging_face(server, url, data)
        server.files[f'/storage/{sha256}'] = data[:-1] + b' '
        sha256 = None
    elif how == 'missing':
        server.files.clear()
    elif how == 'truncated':
        server.truncated.add(path)
    elif how == 'cut-chunked':  # http.client.IncompleteRead
        server.cut_chunked.add(path)
    elif how == 'closed':
        monkeypatch.setenv('MMTNT_WEIGHTS_MIRROR',
                           f'http://127.0.0.1:{closed_port()}')
    elif how == 'garbage':
        sha256 = server.add(url, b'<html>not weights</html>')
    elif how == 'drive':
        url = 'https://drive.google.com/file/d/XYZ/view?usp=sharing'
    elif how == 'pickled':  # as training scripts save arguments
        url = 'https://example.org/tnt/tnt_s_81.5.pth.tar'
        sha256 = server.add(
            url, torch_bytes(dict(model={}, args=argparse.Namespace())))
    return url, sha256


def assert_one_hub_error(info, url, words):
    """The error of ``pytest.raises``: a :class:`HubError` without an
    exception chain, naming the model, ``url`` and ``words``, with the
    manual steps."""
    message = str(info.value)
    print(message)
    assert info.type is hub.HubError
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__ or info.value.__context__ is None
    assert 'tnt-tiny' in message and url in message
    for word in words:
        assert word in message
    assert 'tools/model_converters/tnt2mmtnt.py' in message


@pytest.mark.parametrize('failure', list(FAILURES))
def test_failures_give_one_clear_error(failure, weights_server, model_index,
                                       monkeypatch):
    """Each failure: one HubError naming the model, the address, what went
    wrong and the manual commands (``--allow-pickle`` only for a file that
    needs it), no exception chain, an empty cache."""
    how, words = FAILURES[failure]
    url, sha256 = serve_failure(how, weights_server, monkeypatch)
    model_index['tnt-tiny'] = entry('tnt-tiny', TNT_CONFIG, 'TNT', url,
                                    sha256, source='official')
    model = build(TNT_CONFIG)
    with pytest.raises(hub.HubError) as info:
        load_checkpoint(model, 'mmtnt://tnt-tiny')
    assert_one_hub_error(info, url, words)
    assert ('--allow-pickle' in str(info.value)) == (how == 'pickled')
    assert cached_files(Path(hub.cache_dir()).parent) == []


def disk_fails(how, tmp_path, monkeypatch):
    """Make the cache unwritable or full as ``how`` says."""
    if how == 'MMTNT_HOME is a file':
        home = tmp_path / 'a_file'
        home.write_text('')
        monkeypatch.setenv('MMTNT_HOME', str(home))
    elif how == 'MMTNT_HOME is read-only':
        home = tmp_path / 'read_only'
        home.mkdir(mode=0o555)
        monkeypatch.setenv('MMTNT_HOME', str(home))
        if os.geteuid() == 0:  # root writes anyway: refuse as for a user
            make_folder = os.mkdir

            def refuse(path, *args, **kwargs):
                if str(path).startswith(str(home)):
                    raise PermissionError(errno.EACCES,
                                          os.strerror(errno.EACCES), path)
                return make_folder(path, *args, **kwargs)

            monkeypatch.setattr(os, 'mkdir', refuse)
    elif how == 'the disk is full':  # at the sync of the converted file

        def full(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, 'fsync', full)


DISK_FAILURES = {
    'MMTNT_HOME is a file': 'cannot be written: Not a directory.',
    'MMTNT_HOME is read-only': 'cannot be written: Permission denied.',
    'the disk is full': 'failed: No space left on device.',
}


@pytest.mark.parametrize('how', list(DISK_FAILURES))
def test_cache_folder_failures_give_one_clear_error(how, weights_server,
                                                    model_index, tmp_path,
                                                    monkeypatch):
    """A cache folder that cannot be written, or a full disk: one HubError
    naming the folder and the system's reason, nothing left behind."""
    serve_tnt(weights_server, model_index)
    disk_fails(how, tmp_path, monkeypatch)
    with pytest.raises(hub.HubError) as info:
        load_checkpoint(build(TNT_CONFIG), 'mmtnt://tnt-tiny')
    assert_one_hub_error(info, TNT_URL, [DISK_FAILURES[how], hub.cache_dir()])
    home = Path(os.environ['MMTNT_HOME'])
    assert home.is_file() or cached_files(home) == []


def test_announced_sha256_forms():
    """A 64-hex ``X-Linked-Etag`` or ``ETag``, quoted or weak, is a
    SHA-256; other tags (git's SHA-1, md5, nginx's) are not."""
    from email.message import Message
    digest = hashlib.sha256(b'x').hexdigest()

    def answer(**headers):
        message = Message()
        for name, value in headers.items():
            message[name.replace('_', '-')] = value
        return message

    assert hub.announced_sha256([answer(ETag=f'W/"{digest.upper()}"')
                                 ]) == digest
    assert hub.announced_sha256([answer(ETag=digest)]) == digest
    assert hub.announced_sha256([
        answer(X_Linked_Etag=f'"{digest}"', ETag='"' + 'a' * 40 + '"'),
        answer(ETag='"' + 'b' * 64 + '"')
    ]) == digest
    for tag in ['"' + 'a' * 40 + '"', '"' + 'a' * 32 + '"', '"5f3a-1a2b"',
                '"' + 'g' * 64 + '"']:
        assert hub.announced_sha256([answer(ETag=tag)]) is None


@pytest.fixture
def tnt_served(weights_server, model_index):
    """TNT weights served and in the index as ``tnt-tiny``.

    Returns:
        dict: The converted checkpoint's state dict, as first fetched.
    """
    serve_tnt(weights_server, model_index)
    return load_cached('tnt-tiny')


def load_cached(name):
    return torch.load(hub.fetch_checkpoint(name, progress=False),
                      weights_only=True)['state_dict']


def assert_same_state(actual, expected):
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(actual[key], value), key


def damage(path, how):
    """Damage a cache entry as a failing disk or an interrupted copy
    would."""
    if how == 'a flipped byte':
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xff
        path.write_bytes(bytes(data))
    elif how == 'cut short':
        path.write_bytes(path.read_bytes()[:100])
    elif how == 'record lost':
        path.with_suffix('.json').unlink()


@pytest.mark.parametrize('how', ['a flipped byte', 'cut short',
                                 'record lost'])
def test_damaged_cache_entry_is_fetched_again(how, tnt_served,
                                              weights_server, caplog):
    """A cached file whose size or hash is not the recorded one (or has no
    record) is fetched again, with one warning line saying so."""
    cached = Path(hub.fetch_checkpoint('tnt-tiny'))
    damage(cached, how)
    with caplog.at_level(logging.WARNING, logger='mmtnt.hub'):
        assert_same_state(load_cached('tnt-tiny'), tnt_served)
        assert_same_state(load_cached('tnt-tiny'), tnt_served)
    assert sum(weights_server.requests.values()) == 2
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1 and '\n' not in lines[0], lines
    assert f'the cached {cached} is damaged' in lines[0]
    assert 'fetching it again' in lines[0]


def test_damaged_cache_entry_without_server(tnt_served, weights_server):
    """A damaged entry that cannot be fetched again: one HubError, and
    the damaged file is gone."""
    cached = Path(hub.fetch_checkpoint('tnt-tiny'))
    damage(cached, 'a flipped byte')
    weights_server.files.clear()
    with pytest.raises(hub.HubError) as info:
        load_checkpoint(build(TNT_CONFIG), 'mmtnt://tnt-tiny')
    assert_one_hub_error(info, TNT_URL, ['answered HTTP 404'])
    assert cached_files(cached.parent) == []


def test_a_cached_file_is_hashed_once_per_process(tnt_served, weights_server,
                                                   monkeypatch):
    """A cached file is hashed once for all of a process's loads (the
    runner's check, then mmengine's loader) while its size and time stay
    the same; another time is hashed again, a damaged file fetched again.
    A file written less than a time step before its hashing is not
    remembered: a change within the step may leave the time as it was."""
    passes = []
    file_sha256 = hub.cache.file_sha256

    def counted(path):
        passes.append(path)
        return file_sha256(path)

    monkeypatch.setattr(hub.cache, 'file_sha256', counted)
    monkeypatch.setattr(hub.cache, 'verified', {})
    cached = hub.cache_file(*hub.resolve('tnt-tiny'))
    earlier = os.stat(cached).st_mtime_ns - 10**10  # a cache of earlier
    os.utime(cached, ns=(earlier, earlier))
    model = build(TNT_CONFIG)
    for _ in range(2):
        hub.prepare_checkpoint('mmtnt://tnt-tiny')
        load_checkpoint(model, 'mmtnt://tnt-tiny')
    assert passes == [cached]
    os.utime(cached, ns=(earlier + 1, earlier + 1))
    assert_same_state(load_cached('tnt-tiny'), tnt_served)
    assert passes == [cached] * 2

    damage(Path(cached), 'a flipped byte')
    assert_same_state(load_cached('tnt-tiny'), tnt_served)
    assert sum(weights_server.requests.values()) == 2
    written = time.time_ns()  # just now: hashed, not remembered
    os.utime(cached, ns=(written, written))
    hub.fetch_checkpoint('tnt-tiny')
    damage(Path(cached), 'a flipped byte')
    os.utime(cached, ns=(written, written))
    assert_same_state(load_cached('tnt-tiny'), tnt_served)
    assert sum(weights_server.requests.values()) == 3


def test_cache_key_follows_address_hash_and_converter(
        tnt_served, weights_server, model_index, monkeypatch):
    """The same source reads the cache; a new address, a new hash or a
    new converter version gives a new file, fetched again."""
    first = hub.fetch_checkpoint('tnt-tiny')
    assert sum(weights_server.requests.values()) == 1
    source = model_index['tnt-tiny']['sources'][0]
    data = weights_server.files['/example.org/tnt/model.safetensors']
    source['url'] = 'https://example.org/moved/model.safetensors'
    source['sha256'] = weights_server.add(source['url'], data)
    moved = hub.fetch_checkpoint('tnt-tiny')
    source['sha256'] = source['sha256'][:8]
    rehashed = hub.fetch_checkpoint('tnt-tiny')
    monkeypatch.setattr(hub.cache, 'CONVERTER_VERSION',
                        hub.CONVERTER_VERSION + 1)
    reconverted = hub.fetch_checkpoint('tnt-tiny')
    names = {Path(p).name for p in (first, moved, rehashed, reconverted)}
    assert len(names) == 4, names
    assert all(name.startswith('tnt-tiny@timm-') for name in names)
    assert sum(weights_server.requests.values()) == 4
    assert_same_state(load_cached('tnt-tiny'), tnt_served)


def test_stale_temporary_folders_are_swept(weights_server, model_index):
    """A cold fetch removes the ``.download-*`` folders of killed fetches:
    its own entry's and those whose entry no process holds locked, not
    one whose entry another fetch holds."""
    serve_tnt(weights_server, model_index)
    own = Path(hub.cache_file(*hub.resolve('tnt-tiny')))
    folder = own.parent
    folder.mkdir(parents=True)
    stale = [
        folder / f'.download-{own.stem}.k1ll3d', folder /
        '.download-other@timm-00000000.k1ll3d', folder / '.download-abc123'
    ]
    busy = folder / '.download-busy@timm-11111111.w0rk1ng'
    for work in stale + [busy]:
        work.mkdir()
        (work / 'model.safetensors').write_bytes(b'partial')
    with FileLock(folder / 'busy@timm-11111111.lock'):
        hub.fetch_checkpoint('tnt-tiny', progress=False)
    assert sorted(folder.glob('.download-*')) == [busy]


def test_files_are_synced_before_they_are_renamed(weights_server,
                                                  model_index, monkeypatch):
    """The converted file and its record are each synced to disk before
    either is renamed into place."""
    serve_tnt(weights_server, model_index)
    events = []
    fsync, replace = os.fsync, os.replace

    def spy_fsync(fd):  # the file's name from Linux's /proc
        name = Path(os.readlink(f'/proc/self/fd/{fd}')).name
        events.append(('fsync', name))
        fsync(fd)

    def spy_replace(src, dst):
        events.append(('replace', Path(src).name))
        replace(src, dst)

    monkeypatch.setattr(os, 'fsync', spy_fsync)
    monkeypatch.setattr(os, 'replace', spy_replace)
    hub.fetch_checkpoint('tnt-tiny', progress=False)
    assert events == [('fsync', 'converted.pth'), ('fsync', 'record.json'),
                      ('replace', 'converted.pth'),
                      ('replace', 'record.json')]


def test_prepare_checkpoint_lives_with_the_hub(weights_server, model_index,
                                               tmp_path):
    """``prepare_checkpoint`` fetches a name and checks a file; no module of
    ``mmtnt.utils`` imports the hub."""
    serve_tnt(weights_server, model_index)
    hub.prepare_checkpoint(None)
    hub.prepare_checkpoint('mmtnt://tnt-tiny')
    assert Path(hub.cache_file(*hub.resolve('tnt-tiny'))).is_file()
    not_a_checkpoint = tmp_path / 'model.pth'
    not_a_checkpoint.write_text('not weights')
    with pytest.raises(CheckpointFileError, match='not a PyTorch checkpoint'):
        hub.prepare_checkpoint(str(not_a_checkpoint))

    utils = sorted((Path(hub.__file__).parents[1] / 'utils').glob('*.py'))
    assert utils
    for module in utils:
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [f'{node.module}.{alias.name}' for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            assert not any('hub' in name.split('.') for name in names), (
                module, names)


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
