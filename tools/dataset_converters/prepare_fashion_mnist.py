"""Put Fashion-MNIST where mmpretrain's ``FashionMNIST`` dataset reads it.

The embedded demo (``configs/demo/``) trains on Fashion-MNIST without any
download: the four gzipped idx files come from the Debian package
``dataset-fashion-mnist`` (``apt-get install dataset-fashion-mnist``), or
from any folder given with ``--src`` that holds them (gzipped or not).

Usage::

    python tools/dataset_converters/prepare_fashion_mnist.py [OUT_DIR]
    python tools/dataset_converters/prepare_fashion_mnist.py \
        --src DIR [OUT_DIR]

``OUT_DIR`` defaults to ``data/fashion_mnist``. It then holds the un-gzipped
files mmpretrain expects (``train-images-idx3-ubyte``, ...). Running the
script again does nothing when the files are already there and complete.
The work is done by :mod:`mmtnt.datasets.fashion_mnist`.
"""
import sys

from mmtnt.datasets.cli import fashion_mnist_main

if __name__ == '__main__':
    sys.exit(fashion_mnist_main())
