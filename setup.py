import os
import os.path as osp
import platform
import shutil
import sys
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent
# What `mim` (and mmengine's `mmtnt::` paths) read from an installed
# package's `mmtnt/.mim/`: the model index, the configs it names and the
# tools `mim train/test` run.
MIM_FILES = ('model-index.yml', 'configs', 'tools')


def read_version():
    namespace = {}
    exec((ROOT / 'mmtnt' / 'version.py').read_text(), namespace)
    return namespace['__version__']


def parse_requirements(name):
    """Read the requirement lines of ``requirements/<name>.txt``."""
    lines = (ROOT / 'requirements' / f'{name}.txt').read_text().splitlines()
    return [
        line.strip() for line in lines
        if line.strip() and not line.startswith(('#', '-r'))
    ]


def add_mim_extension():
    """Put the files of :data:`MIM_FILES` under ``mmtnt/.mim``.

    As OpenMMLab's packages do: a legacy editable install (``setup.py
    develop``) links them, so that they stay the repository's files; building
    a wheel or a source distribution copies them, and ``package_data`` ships
    the copies. Other commands (PEP 660 editable installs, whose package
    directory ``mim`` cannot locate, metadata queries) leave ``.mim`` alone.
    """
    if 'develop' in sys.argv:
        mode = 'copy' if platform.system() == 'Windows' else 'symlink'
    elif 'sdist' in sys.argv or 'bdist_wheel' in sys.argv:
        mode = 'copy'
    else:
        return
    mim_path = ROOT / 'mmtnt' / '.mim'
    mim_path.mkdir(exist_ok=True)
    for filename in MIM_FILES:
        src_path = ROOT / filename
        if not src_path.exists():  # e.g. building a wheel from an sdist
            continue
        tar_path = mim_path / filename
        if tar_path.is_symlink() or tar_path.is_file():
            tar_path.unlink()
        elif tar_path.is_dir():
            shutil.rmtree(tar_path)
        if mode == 'symlink':
            os.symlink(osp.relpath(src_path, mim_path), tar_path)
        elif src_path.is_file():
            shutil.copyfile(src_path, tar_path)
        else:
            shutil.copytree(
                src_path,
                tar_path,
                ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))


add_mim_extension()
setup(
    name='mmtnt',
    version=read_version(),
    description='TNT, PyramidTNT and Twins backbones for OpenMMLab '
    'classification, detection and segmentation',
    long_description=(ROOT / 'README.md').read_text(encoding='utf-8'),
    long_description_content_type='text/markdown',
    license='Apache License 2.0',
    packages=find_packages(
        exclude=('configs', 'tools', 'tests', 'demo', 'benchmarks',
                 'benchmarks.*')),
    package_data={
        'mmtnt': [
            '.mim/model-index.yml',
            '.mim/configs/**/*.py',
            '.mim/configs/**/*.yml',
            '.mim/configs/**/*.md',
            '.mim/tools/**/*.py',
            '.mim/tools/**/*.sh',
        ]
    },
    python_requires='>=3.8',
    install_requires=parse_requirements('mminstall') +
    parse_requirements('runtime'),
    extras_require={
        'tests': parse_requirements('tests'),
        'deploy': parse_requirements('deploy'),
        'openvino': parse_requirements('openvino')
    },
    zip_safe=False,
)
