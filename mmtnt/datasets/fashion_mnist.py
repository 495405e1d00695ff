"""Put Fashion-MNIST where mmpretrain's ``FashionMNIST`` dataset reads it,
from the Debian package ``dataset-fashion-mnist`` or a folder ``src``.
Standard library only."""
import gzip
import os
import shutil
import subprocess
import tempfile

DEB_PACKAGE = 'dataset-fashion-mnist'
DEB_DIR = '/usr/share/datasets/fashion-mnist'

# Un-gzipped name -> (idx magic number: 2051 images, 2049 labels; items).
FILES = {
    'train-images-idx3-ubyte': (2051, 60000),
    'train-labels-idx1-ubyte': (2049, 60000),
    't10k-images-idx3-ubyte': (2051, 10000),
    't10k-labels-idx1-ubyte': (2049, 10000),
}
IMAGE_SIZE = 28


def expected_size(name):
    """Byte size of a complete un-gzipped file (a key of ``FILES``)."""
    magic, num = FILES[name]
    if magic == 2051:
        return 16 + num * IMAGE_SIZE * IMAGE_SIZE
    return 8 + num


def is_complete(path, name):
    """Whether ``path`` is a complete idx file ``name`` (size and
    header)."""
    if not os.path.isfile(path) or os.path.getsize(path) != expected_size(
            name):
        return False
    magic, num = FILES[name]
    with open(path, 'rb') as f:
        header = f.read(8)
    return (int.from_bytes(header[:4], 'big') == magic
            and int.from_bytes(header[4:8], 'big') == num)


def package_dirs():
    """The folders of the Debian package's idx files (``dpkg -L``), then
    ``DEB_DIR``."""
    try:
        out = subprocess.run(['dpkg', '-L', DEB_PACKAGE],
                             capture_output=True,
                             text=True,
                             check=False)
    except OSError:  # no dpkg on this system
        out = None
    dirs = []
    if out is not None and out.returncode == 0:
        for line in out.stdout.splitlines():
            if line.endswith('train-images-idx3-ubyte.gz'):
                dirs.append(os.path.dirname(line))
    dirs.append(DEB_DIR)
    return dirs


def find_source(name, src_dirs):
    """The first ``name.gz`` or ``name`` in ``src_dirs``, or None."""
    for folder in src_dirs:
        for candidate in (name + '.gz', name):
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                return path
    return None


def find_sources(names, src=None):
    """Name -> source file of each of ``names``, in ``src`` else the
    Debian package's folders; ``FileNotFoundError`` says how to get them."""
    src_dirs = [src] if src else package_dirs()
    sources = {name: find_source(name, src_dirs) for name in names}
    missing = [name for name, path in sources.items() if path is None]
    if missing:
        hint = (f'check the folder given with --src, or use the Debian '
                f'package {DEB_PACKAGE}' if src else
                f'install the Debian package {DEB_PACKAGE} '
                f'(sudo apt-get install {DEB_PACKAGE}) or pass --src DIR')
        raise FileNotFoundError(
            f'Fashion-MNIST files not found ({", ".join(missing)}; looked '
            f'in {", ".join(src_dirs)}): {hint}.')
    return sources


def copy_uncompressed(src, dst):
    """Write ``src`` un-gzipped to ``dst`` through a renamed temporary
    file."""
    opener = gzip.open if src.endswith('.gz') else open
    folder = os.path.dirname(os.path.abspath(dst))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix='.tmp-')
    try:
        with opener(src, 'rb') as fin, os.fdopen(fd, 'wb') as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        os.chmod(tmp, 0o644)  # mkstemp creates files readable by owner only
        os.replace(tmp, dst)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def prepare(out_dir, src=None):
    """Fill ``out_dir`` with the four un-gzipped files of ``FILES``,
    keeping those already complete.

    Args:
        out_dir (str): The output folder, made if missing.
        src (str, optional): A folder holding the idx files, gzipped or
            not. Defaults to the Debian package's.

    Returns:
        list[str]: The names written; empty when all were complete.

    Raises:
        FileNotFoundError: When a source file is missing.
        RuntimeError: When a source file is not a complete idx file.
    """
    todo = [
        name for name in FILES
        if not is_complete(os.path.join(out_dir, name), name)
    ]
    if not todo:
        return []
    sources = find_sources(todo, src)
    os.makedirs(out_dir, exist_ok=True)
    for name in todo:
        dst = os.path.join(out_dir, name)
        copy_uncompressed(sources[name], dst)
        if not is_complete(dst, name):
            os.remove(dst)
            raise RuntimeError(f'{sources[name]} is not a complete '
                               f'Fashion-MNIST idx file ({name}).')
    return todo
