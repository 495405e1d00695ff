from .feature_pyramid import FeaturePyramid

__all__ = ['FeaturePyramid']
