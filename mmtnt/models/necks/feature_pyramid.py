"""A multi-scale pyramid from the maps of an isotropic backbone (TNT)."""
import math

import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule

from mmtnt.registry import MODELS


def _upsample(channels, times, norm_cfg, act_cfg):
    """``times`` 2x2 stride-2 transposed convolutions with norms and
    activations between them."""
    layers = [nn.ConvTranspose2d(channels, channels, 2, stride=2)]
    for _ in range(times - 1):
        layers += [
            build_norm_layer(norm_cfg, channels)[1],
            build_activation_layer(act_cfg),
            nn.ConvTranspose2d(channels, channels, 2, stride=2)
        ]
    return nn.Sequential(*layers)


@MODELS.register_module()
class FeaturePyramid(BaseModule):
    """Turn maps of one stride (e.g. TNT's 16) into a pyramid.

    As the simple pyramids of BEiT and ViTDet, each level rescales a map by
    a power of two: up by transposed convolutions, down by max pooling
    (``ceil_mode``). Channels are kept. It takes one NCHW map per level
    (e.g. four TNT blocks, shallow to deep) or one map for all.

    Args:
        in_channels (int): Channels of the input maps (and of the outputs).
        scales (Sequence[float]): Rescaling factor (a power of two) of each
            level. Defaults to ``(4, 2, 1, 0.5)``.
        norm_cfg (dict): Norm between transposed convolutions. Default: BN.
        act_cfg (dict): Activation after that norm. Defaults to GELU.
        init_cfg (dict | list[dict], optional): Initialization config.

    Examples:
        >>> import torch
        >>> neck = FeaturePyramid(in_channels=384)
        >>> maps = tuple(torch.rand(1, 384, 14, 20) for _ in range(4))
        >>> [out.shape for out in neck(maps)]
        [torch.Size([1, 384, 56, 80]), torch.Size([1, 384, 28, 40]), torch.Size([1, 384, 14, 20]), torch.Size([1, 384, 7, 10])]
    """  # noqa: E501

    def __init__(self,
                 in_channels,
                 scales=(4, 2, 1, 0.5),
                 norm_cfg=dict(type='BN'),
                 act_cfg=dict(type='GELU'),
                 init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        if len(scales) == 0:
            raise ValueError('FeaturePyramid needs at least one scale.')
        self.in_channels = in_channels
        self.scales = tuple(scales)
        self.levels = nn.ModuleList()
        for scale in self.scales:
            power = math.log2(scale) if scale > 0 else None
            if power is None or power != int(power):
                raise ValueError(
                    f'FeaturePyramid scales must be powers of two (such as '
                    f'4, 2, 1, 0.5, 0.25), got {scale!r} in {scales!r}.')
            power = int(power)
            if power > 0:
                level = _upsample(in_channels, power, norm_cfg, act_cfg)
            elif power < 0:
                level = nn.MaxPool2d(
                    kernel_size=2**-power, stride=2**-power, ceil_mode=True)
            else:
                level = nn.Identity()
            self.levels.append(level)

    def forward(self, inputs):
        """Rescale one map, or one map per level, into one map per level."""
        inputs = tuple(inputs)
        if len(inputs) not in (1, len(self.levels)):
            raise ValueError(
                f'FeaturePyramid with {len(self.levels)} levels '
                f'(scales={self.scales}) takes 1 or {len(self.levels)} '
                f'maps, got {len(inputs)}: set the backbone\'s out_indices '
                'to one block per level, or to a single block.')
        for x in inputs:
            if x.dim() != 4 or x.shape[1] != self.in_channels:
                raise ValueError(
                    f'FeaturePyramid(in_channels={self.in_channels}) takes '
                    f'NCHW maps with {self.in_channels} channels, got shape '
                    f"{tuple(x.shape)}: set the backbone's out_type="
                    "'featmap' and in_channels to its embedding dims.")
        if len(inputs) == 1:
            inputs = inputs * len(self.levels)
        return tuple(level(x) for level, x in zip(self.levels, inputs))
