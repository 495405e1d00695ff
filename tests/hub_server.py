"""A local weights server, a patched model index and the tiny TNT they
serve, for the tests of the hub and of the tools that load published
weights by name (tests/test_apis, tests/test_tools)."""
import collections
import hashlib
import http.server
import threading
import time
from pathlib import Path

import pytest
from equivalence import timm_tiny_tnt
from safetensors import torch as safetensors_torch

from mmtnt import hub

REPO = Path(__file__).resolve().parents[1]
TNT_CONFIG = REPO / 'tests' / 'data' / 'configs' / 'tnt_tiny_cls.py'
TNT_URL = 'https://example.org/tnt/model.safetensors'


class WeightsServer:
    """Serves files the test adds, on 127.0.0.1, in a thread.

    Attributes:
        url (str): ``http://127.0.0.1:PORT``.
        requests (Counter): GET requests by path.
        truncated (set[str]): Paths answered with their full
            ``Content-Length`` but half their bytes, then a closed
            connection.
        cut_chunked (set[str]): Paths answered in one chunk
            (``Transfer-Encoding: chunked``) cut at half its bytes.
        headers (dict[str, dict]): Extra headers of each path's answer.
        redirects (dict[str, str]): Paths answered with a redirect (302)
            to another path, as Hugging Face redirects to its storage.
        delay (float): Seconds each request waits before its answer.
    """

    def __init__(self):
        self.files = {}
        self.requests = collections.Counter()
        self.truncated = set()
        self.cut_chunked = set()
        self.headers = {}
        self.redirects = {}
        self.delay = 0.0
        self._server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                       self._handler())
        self.url = f'http://127.0.0.1:{self._server.server_port}'
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05, ), daemon=True)
        self._thread.start()

    def add(self, url, data):
        """Serve ``data`` as the mirror of ``url`` (``/HOST/PATH``).

        Returns:
            str: The SHA-256 of ``data``.
        """
        path = '/' + url.split('://', 1)[1]
        self.files[path] = data
        return hashlib.sha256(data).hexdigest()

    def _handler(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):

            def do_GET(self):
                server.requests[self.path] += 1
                time.sleep(server.delay)
                data = server.files.get(self.path)
                if self.path in server.redirects:
                    self.send_response(302)
                    self.send_header('Location', server.redirects[self.path])
                    self.end_headers()
                elif data is None:
                    self.send_error(404)
                elif self.path in server.cut_chunked:
                    self.send_cut_chunk(data)
                else:
                    self.send_file(data)

            def send_file(self, data):
                self.send_response(200)
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                if self.path in server.truncated:
                    data = data[:len(data) // 2]
                self.wfile.write(data)

            def send_cut_chunk(self, data):
                """One chunk announcing all of ``data``, cut at half."""
                self.send_response(200)
                self.send_header('Transfer-Encoding', 'chunked')
                self.end_headers()
                self.wfile.write(b'%x\r\n' % len(data))
                self.wfile.write(data[:len(data) // 2])
                self.close_connection = True

            def end_headers(self):
                for name, value in server.headers.get(self.path, {}).items():
                    self.send_header(name, value)
                super().end_headers()

            def log_message(self, *args):
                pass

        return Handler

    def close(self):
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def weights_server(tmp_path, monkeypatch):
    """A :class:`WeightsServer` that every published address points at
    (``MMTNT_WEIGHTS_MIRROR``), with an empty cache (``MMTNT_HOME``)."""
    server = WeightsServer()
    monkeypatch.setenv('MMTNT_WEIGHTS_MIRROR', server.url)
    monkeypatch.setenv('MMTNT_HOME', str(tmp_path / 'mmtnt_home'))
    yield server
    server.close()


@pytest.fixture
def model_index(monkeypatch):
    """The model index, to which a test adds entries (``index[name] =
    entry``) and whose entries it may change, for this test only."""
    index = {
        name: dict(entry, sources=[dict(s) for s in entry['sources']])
        for name, entry in hub.model_index().items()
    }
    monkeypatch.setattr(hub.index, 'model_index', lambda: index)
    return index


def entry(name, config, family, url, sha256=None, source='timm'):
    """A model index entry of one source."""
    return dict(
        name=name, config=str(config), family=family,
        tasks=['Image Classification'],
        sources=[dict(name=source, url=url, sha256=sha256)])


def safetensors_bytes(state_dict):
    """A state dict saved as safetensors."""
    return safetensors_torch.save(
        {k: v.contiguous()
         for k, v in state_dict.items()})


def serve_tnt(server, index):
    """Serve timm TNT weights at :data:`TNT_URL`, ``tnt-tiny`` in the
    index.

    Returns:
        nn.Module: The timm model served.
    """
    source = timm_tiny_tnt()
    sha256 = server.add(TNT_URL, safetensors_bytes(source.state_dict()))
    index['tnt-tiny'] = entry('tnt-tiny', TNT_CONFIG, 'TNT', TNT_URL, sha256)
    return source
