"""Download a published file, checked, and convert it; and the message of
every failure, with the commands that do the same by hand."""
import hashlib
import http.client
import os
import os.path as osp
import pickle
import re
import urllib.parse
import urllib.request

import torch

from .index import FAMILIES, SCHEME, HubError

PAGE_HOSTS = ('drive.google.com', 'pan.baidu.com')
CHUNK = 1 << 20
# A SHA-256 as servers announce it in ETag headers.
SHA256_TAG = re.compile(r'(?:W/)?"?([0-9a-fA-F]{64})"?')


class PickledObjects(ValueError):
    """A download that pickles objects other than tensors."""


def download_url(url):
    """``url``, or its copy under ``$MMTNT_WEIGHTS_MIRROR`` when set."""
    mirror = os.environ.get('MMTNT_WEIGHTS_MIRROR')
    if not mirror:
        return url
    parts = urllib.parse.urlsplit(url)
    return f'{mirror.rstrip("/")}/{parts.netloc}{parts.path}'


def is_web_page(url):
    """Whether ``url`` is a page to click through, not a file."""
    return urllib.parse.urlsplit(url).netloc in PAGE_HOSTS


def manual_steps(entry, source, allow_pickle=False):
    """The commands that fetch and convert a source by hand.

    Args:
        entry (dict): A :func:`~mmtnt.hub.model_index` entry.
        source (dict): One of its sources.
        allow_pickle (bool): Convert with ``--allow-pickle``. Default: False.
    """
    url = source['url']
    file_name = osp.basename(urllib.parse.urlsplit(url).path)
    dst = f'checkpoints/{entry["name"]}.pth'
    script = FAMILIES[entry['family']][1]
    if is_web_page(url):
        steps = [f'open {url} in a browser and save the file']
        file_name = 'THE_SAVED_FILE'
    else:
        steps = [f'wget {url}']
    if file_name.endswith('.safetensors'):
        steps.append(
            'python -c "import torch; from safetensors.torch import '
            f"load_file; torch.save(load_file('{file_name}'), "
            "'model.pth')\"")
        file_name = 'model.pth'
    trusted = ' --allow-pickle' if allow_pickle else ''
    steps.append(f'python tools/model_converters/{script} {file_name} '
                 f'{dst}{trusted}')
    lines = [f'  {i}. {step}' for i, step in enumerate(steps, 1)]
    return '\n'.join(['To do it by hand:'] + lines +
                     [f'then load {dst} in place of {SCHEME}{entry["name"]}.'])


def source_error(entry, source, what, allow_pickle=False):
    """A :class:`HubError` saying ``what`` went wrong, with the
    :func:`manual_steps`."""
    steps = manual_steps(entry, source, allow_pickle)
    return HubError(f'Cannot get the weights of {entry["name"]} '
                    f'(source {source["name"]}) from {source["url"]}: '
                    f'{what}.\n{steps}')


def error_reason(error):
    """The system's words for an ``OSError`` (or a ``URLError``'s reason),
    else the error's message."""
    reason = getattr(error, 'reason', None)
    reason = error if reason is None else reason
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason)


class _RecordRedirects(urllib.request.HTTPRedirectHandler):
    """Keeps the headers of each redirect: Hugging Face announces the
    SHA-256 (``X-Linked-Etag``) in the redirect, not the file's answer."""

    def __init__(self):
        self.headers = []

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.headers.append(headers)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def announced_sha256(headers):
    """The SHA-256 that a server announces for the file it sends.

    Args:
        headers (list[Message]): The headers of each answer, in order.

    Returns:
        str | None: The first ``X-Linked-Etag`` or ``ETag`` that is a
        SHA-256, in lowercase hex.

    Examples:
        >>> from email.message import Message
        >>> answer = Message()
        >>> answer['ETag'] = '"' + 'ab' * 32 + '"'
        >>> announced_sha256([answer]) == 'ab' * 32
        True
    """
    for answer in headers:
        for name in ('X-Linked-Etag', 'ETag'):
            match = SHA256_TAG.fullmatch(answer.get(name, '').strip())
            if match:
                return match.group(1).lower()
    return None


def download(url, dst, sha256=None, progress=True):
    """Download ``url`` to ``dst``, checking its length and SHA-256
    against ``sha256`` (whole or leading digits) and the server's; returns
    the SHA-256 (``ValueError`` for a truncated file or another hash)."""
    from tqdm import tqdm

    redirects = _RecordRedirects()
    request = urllib.request.Request(url, headers={'User-Agent': 'mmtnt'})
    digest = hashlib.sha256()
    done = 0
    with urllib.request.build_opener(redirects).open(
            request, timeout=60) as response, open(dst, 'wb') as f:
        size = response.headers.get('Content-Length')
        size = int(size) if size is not None else None
        with tqdm(total=size, disable=not progress, unit='B',
                  unit_scale=True, unit_divisor=1024,
                  desc=osp.basename(dst)) as bar:
            try:
                while chunk := response.read(CHUNK):
                    f.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    bar.update(len(chunk))
            except http.client.IncompleteRead as error:  # chunked, cut
                done += len(error.partial)
                raise ValueError(f'the download stopped after {done} bytes, '
                                 'before the end of the file (truncated)'
                                 ) from None
        announced = announced_sha256(redirects.headers + [response.headers])
    if size is not None and done != size:
        raise ValueError(f'the download stopped after {done} of {size} '
                         'bytes (truncated)')
    digest = digest.hexdigest()
    if sha256 is not None and not digest.startswith(sha256.lower()):
        raise ValueError(f'its SHA-256 is {digest}, the index records '
                         f'{sha256} (a wrong or changed file)')
    if announced is not None and digest != announced:
        raise ValueError(f'its SHA-256 is {digest}, the server announced '
                         f'{announced} (a damaged or changed file)')
    return digest


def read_converted(entry, path):
    """Load a downloaded file (:class:`PickledObjects` if it pickles more
    than tensors) and convert it with its family's converter."""
    from .. import converters
    if path.endswith('.safetensors'):
        from safetensors.torch import load_file
        checkpoint = load_file(path)
    else:
        try:
            checkpoint = converters.load_checkpoint_file(path)
        except RuntimeError as error:
            if not isinstance(error.__cause__, pickle.UnpicklingError):
                raise
            raise PickledObjects(
                f'it pickles objects other than tensors '
                f'({_unsafe_globals(path)}), which mmtnt does not unpickle '
                'from a download') from None
    return getattr(converters, FAMILIES[entry['family']][0])(checkpoint)


def _unsafe_globals(path):
    """The objects that a checkpoint pickles beside its tensors."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # torch's legacy format: no list without unpickling
        return 'in the legacy format, not listed'
    return ', '.join(names)
