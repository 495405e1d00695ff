"""The embedded demos' data, made from what is installed (no download):
Fashion-MNIST (:mod:`~mmtnt.datasets.fashion_mnist`, standard library only)
and the detection and segmentation demo scenes
(:mod:`~mmtnt.datasets.demo_scenes`, needs scikit-image), not imported here.
"""
