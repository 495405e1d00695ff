from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent


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


setup(
    name='mmtnt',
    version=read_version(),
    description='TNT, PyramidTNT and Twins backbones for OpenMMLab '
    'classification, detection and segmentation',
    long_description=(ROOT / 'README.md').read_text(encoding='utf-8'),
    long_description_content_type='text/markdown',
    license='Apache License 2.0',
    packages=find_packages(exclude=('configs', 'tools', 'tests', 'demo')),
    python_requires='>=3.8',
    install_requires=parse_requirements('mminstall') +
    parse_requirements('runtime'),
    extras_require={'tests': parse_requirements('tests')},
    zip_safe=False,
)
