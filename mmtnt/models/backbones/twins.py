"""Twins: PCPVT and SVT backbones (https://arxiv.org/abs/2104.13840)."""
import math

import torch.nn as nn
from mmcv.cnn import build_norm_layer
from mmengine.model.weight_init import (constant_init, normal_init,
                                        trunc_normal_init)

from mmtnt.registry import MODELS
from ..layers import (LocallyGroupedAttention, SpatialReductionAttention,
                      TransformerBlock, map_to_tokens, tokens_to_map)
from ..utils import ceil_div, check_stage_lists, pad_to_multiple
from .base_backbone import BaseBackbone, TokenGrid, stage_drop_path_rates

#: What the released PCPVT archs share.
PCPVT_WIDTHS = dict(
    embed_dims=[64, 128, 320, 512],
    num_heads=[1, 2, 5, 8],
    mlp_ratios=[8, 8, 4, 4],
    sr_ratios=[8, 4, 2, 1])


def svt_arch(width, depths):
    """A released SVT arch: widths x1, 2, 4, 8, heads of 32, 7x7 windows."""
    dims = [width * 2**i for i in range(4)]
    return dict(
        embed_dims=dims,
        depths=depths,
        num_heads=[d // 32 for d in dims],
        mlp_ratios=[4] * 4,
        sr_ratios=[8, 4, 2, 1],
        window_sizes=[7] * 4)


class PatchEmbed(nn.Module):
    """Embed ``patch_size`` squares of a map by a convolution and a norm,
    zero-padding the right and bottom (as mmseg's ``padding='corner'``)."""

    def __init__(self, in_channels, embed_dims, patch_size, norm_cfg):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(
            in_channels, embed_dims, kernel_size=patch_size,
            stride=patch_size)
        self.norm = build_norm_layer(norm_cfg, embed_dims)[1]

    def forward(self, x):
        """Tokens (B, h*w, C) and their grid (h, w)."""
        x = self.proj(pad_to_multiple(x, self.patch_size))
        hw_shape = (x.shape[-2], x.shape[-1])
        return self.norm(map_to_tokens(x)), hw_shape


class PositionEncoding(nn.Module):
    """CPVT's position encoding (PEG, https://arxiv.org/abs/2102.10882): a
    3x3 depth-wise convolution of the token map, added to the tokens."""

    def __init__(self, embed_dims):
        super().__init__()
        self.proj = nn.Conv2d(
            embed_dims, embed_dims, kernel_size=3, padding=1,
            groups=embed_dims)

    def forward(self, x, hw_shape):
        return x + map_to_tokens(self.proj(tokens_to_map(x, hw_shape)))


class TwinsStage(nn.Module):
    """A patch embedding, blocks with the PEG after the first one, a norm
    (or ``nn.Identity``)."""

    def __init__(self, patch_embed, blocks, drop_rate, norm):
        super().__init__()
        embed_dims = patch_embed.proj.out_channels
        self.patch_embed = patch_embed
        self.drop_after_embed = nn.Dropout(drop_rate)
        self.blocks = nn.ModuleList(blocks)
        self.pos_conv = PositionEncoding(embed_dims)
        self.norm = norm

    def forward(self, x, run_block):
        """Tokens (B, h*w, C) and their grid (h, w) of a map (B, C, H, W)."""
        x, hw_shape = self.patch_embed(x)
        x = self.drop_after_embed(x)
        for i, block in enumerate(self.blocks):
            x = run_block(block, x, hw_shape)
            if i == 0:
                x = self.pos_conv(x, hw_shape)
        return self.norm(x), hw_shape


@MODELS.register_module()
class PCPVT(BaseBackbone):
    """Twins-PCPVT.

    `Twins <https://arxiv.org/abs/2104.13840>`_: four stages of global
    sub-sampled attention (GSA) at strides 4, 8, 16 and 32; inputs of at
    least 29x29 pixels for the released archs.

    Args:
        arch (str | dict): ``'s'``, ``'b'``, ``'l'`` (or full names), or a
            dict of per-stage lists. Defaults to ``'s'``.
        in_channels (int): Channels of the input image. Defaults to 3.
        patch_sizes (Sequence[int], optional): Defaults to (4, 2, 2, ...).
        qkv_bias (bool): Query/key/value projection bias. Defaults to True.
        drop_rate (float): Dropout after projections. Defaults to 0.
        attn_drop_rate (float): Dropout on attention weights. Defaults to 0.
        drop_path_rate (float): Stochastic depth rate. Defaults to 0.
        out_indices (int | Sequence[int]): Stages to output. Defaults to -1.
        out_type (str): ``'featmap'`` (B, C_i, H/s_i, W/s_i) or its mean
            ``'avg_featmap'`` (B, C_i). Defaults to ``'avg_featmap'``.
        norm_after_stage (bool | Sequence[bool], optional): Which stages
            end with a norm. Defaults to the last only, as officially.
        norm_cfg (dict): Norms of the blocks and stages (LN, eps 1e-6).
        patch_norm_cfg (dict): Norms of the patch embeddings (LN, eps 1e-5).
        sr_norm_cfg (dict): Norms after GSA's reduction (LN, eps 1e-5).
        act_cfg (dict): The MLPs' activation. Defaults to GELU.
        frozen_stages (int): -1 freezes nothing, 0 the first patch
            embedding, ``k`` the first ``k`` stages. Defaults to -1.
        norm_eval (bool): See :class:`BaseBackbone`. Defaults to False.
        with_cp (bool): See :class:`BaseBackbone`. Defaults to False.
        init_cfg (dict | list[dict], optional): None: the official one.

    Examples:
        >>> import torch
        >>> from mmtnt.models import PCPVT
        >>> model = PCPVT(arch='s', out_indices=(0, 1, 2, 3),
        ...               out_type='featmap').eval()
        >>> [out.shape for out in model(torch.rand(1, 3, 225, 319))]
        [torch.Size([1, 64, 57, 80]), torch.Size([1, 128, 29, 40]), torch.Size([1, 320, 15, 20]), torch.Size([1, 512, 8, 10])]
    """  # noqa: E501
    # The released archs differ in depth only.
    arch_zoo = {
        **dict.fromkeys(['s', 'small'],
                        dict(PCPVT_WIDTHS, depths=[3, 4, 6, 3])),
        **dict.fromkeys(['b', 'base'],
                        dict(PCPVT_WIDTHS, depths=[3, 4, 18, 3])),
        **dict.fromkeys(['l', 'large'],
                        dict(PCPVT_WIDTHS, depths=[3, 8, 27, 3])),
    }
    essential_keys = {
        'embed_dims', 'depths', 'num_heads', 'mlp_ratios', 'sr_ratios'
    }
    foreign_keys = (r'(patch_embeds|pos_block|position_encodings|blocks|'
                    r'layers|norm_list)\.|norm_after_stage|stages\.\d+\.\d+\.')
    converter = 'twins2mmtnt.py'

    def __init__(self,
                 arch='s',
                 in_channels=3,
                 patch_sizes=None,
                 qkv_bias=True,
                 drop_rate=0.,
                 attn_drop_rate=0.,
                 drop_path_rate=0.,
                 out_indices=-1,
                 out_type='avg_featmap',
                 norm_after_stage=None,
                 norm_cfg=dict(type='LN', eps=1e-6),
                 patch_norm_cfg=dict(type='LN', eps=1e-5),
                 sr_norm_cfg=dict(type='LN', eps=1e-5),
                 act_cfg=dict(type='GELU'),
                 frozen_stages=-1,
                 norm_eval=False,
                 with_cp=False,
                 init_cfg=None):
        super().__init__(arch, out_indices, out_type, frozen_stages,
                         norm_eval, with_cp, init_cfg)
        settings = self.arch_settings
        num_stages = self.num_stages
        if patch_sizes is None:
            patch_sizes = [4] + [2] * (num_stages - 1)
        if norm_after_stage is None:
            norm_after_stage = [False] * (num_stages - 1) + [True]
        elif isinstance(norm_after_stage, bool):
            norm_after_stage = [norm_after_stage] * num_stages
        check_stage_lists(
            dict(
                settings,
                patch_sizes=patch_sizes,
                norm_after_stage=norm_after_stage), num_stages,
            type(self).__name__)
        self.embed_dims = list(settings['embed_dims'])
        self.patch_sizes = list(patch_sizes)
        self.sr_ratios = list(settings['sr_ratios'])
        self.norm_after_stage = [bool(n) for n in norm_after_stage]

        rates = stage_drop_path_rates(drop_path_rate, settings['depths'])
        attn_cfg = dict(
            qkv_bias=qkv_bias, attn_drop=attn_drop_rate, proj_drop=drop_rate)
        self.stages = nn.ModuleList()
        for i in range(self.num_built_stages):
            dims = self.embed_dims[i]
            blocks = [
                TransformerBlock(
                    dims,
                    self._build_attention(i, j, settings['num_heads'][i],
                                          attn_cfg, sr_norm_cfg),
                    mlp_ratio=settings['mlp_ratios'][i],
                    drop_rate=drop_rate,
                    drop_path_rate=rate,
                    norm_cfg=norm_cfg,
                    act_cfg=act_cfg) for j, rate in enumerate(rates[i])
            ]
            patch_embed = PatchEmbed(
                in_channels if i == 0 else self.embed_dims[i - 1], dims,
                self.patch_sizes[i], patch_norm_cfg)
            norm = build_norm_layer(norm_cfg, dims)[1] \
                if self.norm_after_stage[i] else nn.Identity()
            self.stages.append(TwinsStage(patch_embed, blocks, drop_rate,
                                          norm))
        self._freeze()

    def _build_attention(self, stage, index, num_heads, attn_cfg,
                         sr_norm_cfg):
        """GSA in every block."""
        return SpatialReductionAttention(
            self.embed_dims[stage],
            num_heads,
            sr_ratio=self.sr_ratios[stage],
            reduction='conv',
            norm_cfg=sr_norm_cfg,
            **attn_cfg)

    def stage_token_grids(self, height, width):
        """Each patch embedding pads to a multiple of its patch size."""
        grids, stride = [], 1
        for i in range(self.num_built_stages):
            p = self.patch_sizes[i]
            height, width = ceil_div(height, p), ceil_div(width, p)
            stride *= p
            grids.append(
                TokenGrid((height, width), stride, self.embed_dims[i],
                          self.sr_ratios[i]))
        return grids

    def token_layer(self):
        last = self.out_indices[-1]
        if self.norm_after_stage[last]:
            return f'stages.{last}.norm'
        return f'stages.{last}.blocks.{len(self.stages[last].blocks) - 1}'

    def block_depth(self, name):
        """A patch embedding goes with the block before it, the PEG with the
        first block, a norm with the last (the final norm after all)."""

        def part_offset(i, part):
            if part == 'norm' and i < len(self.stages) - 1:
                return len(self.stages[i].blocks)
            return {'patch_embed': 0, 'pos_conv': 1}.get(part)

        return self.stage_depth(name, part_offset)

    def frozen_parts(self):
        if self.frozen_stages == 0:
            return [self.stages[0].patch_embed]
        return list(self.stages[:self.frozen_stages])

    def init_weights(self):
        """The official initialization, unless ``init_cfg`` is given."""
        if self.init_cfg is not None:
            super().init_weights()
            return
        for m in self.modules():
            if isinstance(m, nn.Linear):
                trunc_normal_init(m, std=.02, bias=0)
            elif isinstance(m, nn.LayerNorm):
                constant_init(m, val=1, bias=0)
            elif isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * \
                    m.out_channels // m.groups
                normal_init(m, std=math.sqrt(2.0 / fan_out), bias=0)

    def forward(self, x):
        self.check_input(x)
        outs = []
        for i, stage in enumerate(self.stages):
            tokens, hw_shape = stage(x, self.run_block)
            if i in self.out_indices:
                outs.append(self.format_tokens(tokens, hw_shape))
            x = tokens_to_map(tokens, hw_shape)
        return tuple(outs)


@MODELS.register_module()
class SVT(PCPVT):
    """Twins-SVT: :class:`PCPVT` whose blocks alternate locally-grouped
    attention (LSA, even blocks) and GSA (odd blocks).

    Args:
        arch (str | dict): As :class:`PCPVT`, with ``window_sizes``.
        **kwargs: The other arguments of :class:`PCPVT`.

    Examples:
        >>> import torch
        >>> from mmtnt.models import SVT
        >>> model = SVT(arch='s').eval()
        >>> [out.shape for out in model(torch.rand(1, 3, 224, 224))]
        [torch.Size([1, 512])]
    """
    arch_zoo = {
        **dict.fromkeys(['s', 'small'], svt_arch(64, [2, 2, 10, 4])),
        **dict.fromkeys(['b', 'base'], svt_arch(96, [2, 2, 18, 2])),
        **dict.fromkeys(['l', 'large'], svt_arch(128, [2, 2, 18, 2])),
    }
    essential_keys = PCPVT.essential_keys | {'window_sizes'}

    def _build_attention(self, stage, index, num_heads, attn_cfg,
                         sr_norm_cfg):
        """LSA in even blocks, GSA in odd ones."""
        if index % 2 == 1:
            return super()._build_attention(stage, index, num_heads,
                                            attn_cfg, sr_norm_cfg)
        return LocallyGroupedAttention(
            self.embed_dims[stage],
            num_heads,
            window_size=self.arch_settings['window_sizes'][stage],
            **attn_cfg)
