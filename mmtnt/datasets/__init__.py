"""The embedded demos' data, made from what is installed (no download):
Fashion-MNIST and the demo scenes (needs scikit-image), not imported here.
"""
