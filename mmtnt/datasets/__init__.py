"""The embedded demos' data, made from what is installed (no download).

- :mod:`mmtnt.datasets.fashion_mnist`: Fashion-MNIST from the Debian
  package ``dataset-fashion-mnist``, in the layout of mmpretrain's
  ``FashionMNIST`` (standard library only);
- :mod:`mmtnt.datasets.demo_scenes`: the detection and segmentation demo
  scenes, in the COCO and ADE20K formats (needs scikit-image).

The modules are not imported here, so that the Fashion-MNIST one runs
without scikit-image.
"""
