"""Twins: PCPVT and SVT backbones (https://arxiv.org/abs/2104.13840)."""
import math
import re

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmengine.model.weight_init import trunc_normal_

from mmtnt.registry import MODELS
from ..utils import Linear, Mlp, normalize_out_indices, resolve_arch
from ..utils.attention import scaled_dot_product_attention
from ..utils.cpu_fusion import can_fuse, linear_add, linear_gelu
from ..utils.layout import map_to_tokens, tokens_to_map
from .base_backbone import BaseBackbone


class PatchEmbed(nn.Module):
    """Embed non-overlapping ``patch_size`` squares of a feature map.

    A convolution with kernel and stride ``patch_size``, then a norm over the
    channels. Inputs whose sides are not multiples of ``patch_size`` are
    zero-padded at the right and bottom first (as mmseg's and mmpretrain's
    ``padding='corner'``), so no pixel is dropped: the output grid is
    ``ceil(H / patch_size) x ceil(W / patch_size)``.

    Args:
        in_channels (int): Channels of the input.
        embed_dims (int): Channels of the output tokens.
        patch_size (int): Side of a patch.
        norm_cfg (dict): The norm after the convolution.

    Examples:
        >>> import torch
        >>> embed = PatchEmbed(3, 64, 4, dict(type='LN'))
        >>> tokens, hw = embed(torch.rand(2, 3, 30, 41))
        >>> tokens.shape, hw
        (torch.Size([2, 88, 64]), (8, 11))
    """

    def __init__(self, in_channels, embed_dims, patch_size, norm_cfg):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(
            in_channels, embed_dims, kernel_size=patch_size,
            stride=patch_size)
        self.norm = build_norm_layer(norm_cfg, embed_dims)[1]

    def forward(self, x):
        """Return tokens (B, h*w, C) and their grid (h, w)."""
        p = self.patch_size
        pad_h, pad_w = -x.shape[-2] % p, -x.shape[-1] % p
        if pad_h or pad_w:
            x = F.pad(x, (0, pad_w, 0, pad_h))
        x = self.proj(x)
        hw_shape = (x.shape[-2], x.shape[-1])
        return self.norm(map_to_tokens(x)), hw_shape


class PositionEncoding(nn.Module):
    """The conditional position encoding (PEG) of CPVT
    (https://arxiv.org/abs/2102.10882): a 3x3 depth-wise convolution of the
    token map, added to the tokens.

    Args:
        embed_dims (int): Channels of the tokens.

    Examples:
        >>> import torch
        >>> peg = PositionEncoding(32)
        >>> peg(torch.rand(2, 12, 32), (3, 4)).shape
        torch.Size([2, 12, 32])
    """

    def __init__(self, embed_dims):
        super().__init__()
        self.proj = nn.Conv2d(
            embed_dims, embed_dims, kernel_size=3, padding=1,
            groups=embed_dims)

    def forward(self, x, hw_shape):
        return x + map_to_tokens(self.proj(tokens_to_map(x, hw_shape)))


class GlobalSubsampledAttention(nn.Module):
    """Global sub-sampled attention (GSA): every token attends to a
    sub-sampled copy of the map (a ``sr_ratio`` x ``sr_ratio`` convolution
    with the same stride, then a norm).

    Like a strided convolution, the reduction ignores the last
    ``H % sr_ratio`` rows and ``W % sr_ratio`` columns of the keys and
    values (the official model's behaviour); queries cover every token.
    With ``sr_ratio=1`` this is plain multi-head self-attention, computed
    with one fused query/key/value projection ``qkv`` (the official ``q``
    and ``kv`` concatenated) instead of ``q`` and ``kv``.

    Args:
        embed_dims (int): Channels of the tokens.
        num_heads (int): Attention heads; must divide ``embed_dims``.
        sr_ratio (int): Spatial reduction of keys and values; 1 attends to
            all tokens.
        qkv_bias (bool): Whether the query/key/value projections have a bias.
        attn_drop (float): Dropout rate on the attention weights.
        proj_drop (float): Dropout rate after the output projection.
        norm_cfg (dict): The norm after the reduction.

    Examples:
        >>> import torch
        >>> attn = GlobalSubsampledAttention(64, 2, sr_ratio=4)
        >>> attn(torch.rand(2, 15 * 17, 64), (15, 17)).shape
        torch.Size([2, 255, 64])
    """

    def __init__(self,
                 embed_dims,
                 num_heads,
                 sr_ratio=1,
                 qkv_bias=True,
                 attn_drop=0.,
                 proj_drop=0.,
                 norm_cfg=dict(type='LN', eps=1e-5)):
        super().__init__()
        _check_heads(embed_dims, num_heads)
        self.num_heads = num_heads
        self.sr_ratio = sr_ratio
        self.attn_drop = attn_drop
        if sr_ratio > 1:
            self.q = Linear(embed_dims, embed_dims, bias=qkv_bias)
            self.sr = nn.Conv2d(
                embed_dims, embed_dims, kernel_size=sr_ratio,
                stride=sr_ratio)
            self.sr_norm = build_norm_layer(norm_cfg, embed_dims)[1]
            self.kv = Linear(embed_dims, embed_dims * 2, bias=qkv_bias)
        else:
            # Plain self-attention: one projection for queries, keys and
            # values.
            self.qkv = Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, hw_shape, identity=None):
        """Attend over tokens ``x`` (B, H*W, C); with ``identity``, return
        ``identity + attention(x)`` (one fused step in CPU inference)."""
        B, N, C = x.shape
        heads = self.num_heads
        if self.sr_ratio > 1:
            q = self.q(x).unflatten(-1, (heads, -1)).transpose(1, 2)
            reduced = self.sr(tokens_to_map(x, hw_shape))
            kv = self.kv(self.sr_norm(map_to_tokens(reduced)))
            k, v = kv.unflatten(-1, (2, heads, -1)).permute(2, 0, 3, 1,
                                                             4).unbind(0)
        else:
            q, k, v = self.qkv(x).unflatten(-1, (3, heads, -1)).permute(
                2, 0, 3, 1, 4).unbind(0)
        x = scaled_dot_product_attention(
            q, k, v, dropout_p=self.attn_drop if self.training else 0.)
        return _project(self, x.transpose(1, 2).reshape(B, N, C), identity)


class LocallyGroupedAttention(nn.Module):
    """Locally-grouped self-attention (LSA): attention within each
    ``window_size`` x ``window_size`` window.

    A map whose sides are not multiples of ``window_size`` is padded at the
    right and bottom; padded tokens are masked out as keys, so every real
    token attends to exactly the real tokens of its window, whichever of the
    two pads is zero. (The official classification code does not mask, and
    the masks of mmpretrain and mmseg vanish when one of the pads is zero.)

    Args:
        embed_dims (int): Channels of the tokens.
        num_heads (int): Attention heads; must divide ``embed_dims``.
        window_size (int): Side of a window.
        qkv_bias (bool): Whether the query/key/value projection has a bias.
        attn_drop (float): Dropout rate on the attention weights.
        proj_drop (float): Dropout rate after the output projection.

    Examples:
        >>> import torch
        >>> attn = LocallyGroupedAttention(64, 2, window_size=7)
        >>> attn(torch.rand(2, 15 * 17, 64), (15, 17)).shape
        torch.Size([2, 255, 64])
    """

    def __init__(self,
                 embed_dims,
                 num_heads,
                 window_size=7,
                 qkv_bias=True,
                 attn_drop=0.,
                 proj_drop=0.):
        super().__init__()
        _check_heads(embed_dims, num_heads)
        if window_size < 1:
            raise ValueError(f'window_size must be positive, got '
                             f'{window_size}.')
        self.num_heads = num_heads
        self.window_size = window_size
        self.attn_drop = attn_drop
        self.qkv = Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    @staticmethod
    def padding_mask(hw_shape, window_size, device=None):
        """Which keys of each window are real tokens.

        Args:
            hw_shape (tuple[int, int]): The map (H, W) before padding.
            window_size (int): Side of a window.
            device (torch.device, optional): Where to build the mask.

        Returns:
            Tensor: Boolean (num_windows, 1, 1, window_size**2), True for real
            tokens, windows in row-major order.
        """
        H, W = hw_shape
        ws = window_size
        rows = torch.arange(H + -H % ws, device=device) < H
        cols = torch.arange(W + -W % ws, device=device) < W
        real = rows[:, None] & cols[None, :]
        real = real.view(-1, ws, real.shape[1] // ws, ws).transpose(1, 2)
        return real.reshape(-1, 1, 1, ws * ws)

    def forward(self, x, hw_shape, identity=None):
        """Attend within the windows of tokens ``x`` (B, H*W, C); with
        ``identity``, return ``identity + attention(x)`` (one fused step in
        CPU inference)."""
        B, N, C = x.shape
        H, W = hw_shape
        ws, heads = self.window_size, self.num_heads
        pad_b, pad_r = -H % ws, -W % ws
        x = x.view(B, H, W, C)
        if pad_b or pad_r:
            x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        nh, nw = (H + pad_b) // ws, (W + pad_r) // ws
        # (B * windows, ws * ws, C), windows in row-major order.
        windows = x.view(B, nh, ws, nw, ws, C).transpose(2, 3).reshape(
            B * nh * nw, ws * ws, C)
        q, k, v = self.qkv(windows).unflatten(-1, (3, heads, -1)).permute(
            2, 0, 3, 1, 4).unbind(0)
        mask = None
        if pad_b or pad_r:
            mask = self.padding_mask(hw_shape, ws, x.device).repeat(
                B, 1, 1, 1)
        windows = scaled_dot_product_attention(
            q, k, v, attn_mask=mask,
            dropout_p=self.attn_drop if self.training else 0.)
        windows = windows.transpose(1, 2).reshape(B, nh, nw, ws, ws, C)
        x = windows.transpose(2, 3).reshape(B, nh * ws, nw * ws, C)
        if pad_b or pad_r:
            x = x[:, :H, :W]
        # Projected after dropping the padding: no work on padded tokens.
        return _project(self, x.reshape(B, N, C), identity)


class TwinsBlock(nn.Module):
    """A pre-norm transformer block around a GSA or LSA attention.

    Args:
        embed_dims (int): Channels of the tokens.
        attn (nn.Module): The attention, called as ``attn(x, hw_shape)``.
        mlp_ratio (float): MLP hidden channels over ``embed_dims``.
        drop_rate (float): Dropout rate in the MLP.
        drop_path_rate (float): Stochastic depth rate of both branches.
        norm_cfg (dict): The two norms.
        act_cfg (dict): The MLP's activation.
    """

    def __init__(self, embed_dims, attn, mlp_ratio, drop_rate,
                 drop_path_rate, norm_cfg, act_cfg):
        super().__init__()
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.attn = attn
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.mlp = Mlp(
            embed_dims,
            int(embed_dims * mlp_ratio),
            act_cfg=act_cfg,
            drop=drop_rate)
        self.drop_path = DropPath(
            drop_path_rate) if drop_path_rate > 0 else nn.Identity()
        self.exact_gelu = isinstance(self.mlp.act, nn.GELU) and \
            self.mlp.act.approximate == 'none'

    def forward(self, x, hw_shape):
        if can_fuse(x, self.training):
            # Inference on the CPU: the residual additions and the GELU are
            # post-ops of the matrix products (same function, fewer passes
            # over memory).
            x = self.attn(self.norm1(x), hw_shape, identity=x)
            hidden = self.norm2(x)
            if self.exact_gelu:
                hidden = linear_gelu(hidden, self.mlp.fc1)
            else:
                hidden = self.mlp.act(self.mlp.fc1(hidden))
            return linear_add(hidden, self.mlp.fc2, x)
        x = x + self.drop_path(self.attn(self.norm1(x), hw_shape))
        return x + self.drop_path(self.mlp(x, norm=self.norm2))


class TwinsStage(nn.Module):
    """A patch embedding, transformer blocks with the position encoding
    after the first one, and an optional norm.

    Args:
        patch_embed (PatchEmbed): The stage's patch embedding.
        blocks (list[TwinsBlock]): The blocks.
        drop_rate (float): Dropout rate after the patch embedding.
        norm (nn.Module): The norm after the blocks (may be
            ``nn.Identity``).
        with_cp (bool): Recompute each block in the backward pass.
    """

    def __init__(self, patch_embed, blocks, drop_rate, norm, with_cp):
        super().__init__()
        embed_dims = patch_embed.proj.out_channels
        self.patch_embed = patch_embed
        self.drop_after_embed = nn.Dropout(drop_rate)
        self.blocks = nn.ModuleList(blocks)
        self.pos_conv = PositionEncoding(embed_dims)
        self.norm = norm
        self.with_cp = with_cp

    def forward(self, x):
        """Map a feature map (B, C_in, H, W) to tokens (B, h*w, C) and their
        grid (h, w)."""
        x, hw_shape = self.patch_embed(x)
        x = self.drop_after_embed(x)
        for i, block in enumerate(self.blocks):
            if self.with_cp and self.training and x.requires_grad:
                x = cp.checkpoint(block, x, hw_shape, use_reentrant=False)
            else:
                x = block(x, hw_shape)
            if i == 0:
                x = self.pos_conv(x, hw_shape)
        return self.norm(x), hw_shape


@MODELS.register_module()
class PCPVT(BaseBackbone):
    """Twins-PCPVT.

    A PyTorch implementation of `Twins: Revisiting the Design of Spatial
    Attention in Vision Transformers <https://arxiv.org/abs/2104.13840>`_.
    Four stages, each a patch embedding (stride 4, then 2, 2, 2) followed by
    transformer blocks with global sub-sampled attention (GSA); a
    conditional position encoding (a depth-wise 3x3 convolution, PEG) follows
    the first block of each stage, so inputs of any size work.

    Inputs whose sides are not multiples of the strides are padded at the
    right and bottom by each patch embedding (stage ``i`` has
    ``ceil(H / stride_i) x ceil(W / stride_i)`` tokens). The smallest input
    is set by the spatial reduction: each stage's map must be at least
    ``sr_ratio`` tokens high and wide (29x29 pixels for the released archs).

    For CPU float32 inference without autograd (e.g. under
    ``torch.no_grad()``), the MLPs' GELU and the residual additions run as
    oneDNN post-ops of the matrix products (:mod:`mmtnt.models.utils.
    cpu_fusion`): the same function with fewer passes over memory.

    Args:
        arch (str | dict): ``'s'``/``'small'``, ``'b'``/``'base'``,
            ``'l'``/``'large'``, or a dict of per-stage lists with the keys
            ``embed_dims``, ``depths``, ``num_heads``, ``mlp_ratios`` and
            ``sr_ratios``. Defaults to ``'s'``.
        in_channels (int): Channels of the input image. Defaults to 3.
        patch_sizes (Sequence[int], optional): Patch size (= stride) of each
            stage's embedding. Defaults to 4 for the first stage and 2 for
            the others.
        qkv_bias (bool): Whether query/key/value projections have a bias.
            Defaults to True.
        drop_rate (float): Dropout rate after patch embeddings, attention
            projections and MLP layers. Defaults to 0.
        attn_drop_rate (float): Dropout rate on attention weights.
            Defaults to 0.
        drop_path_rate (float): Stochastic depth rate of the last block,
            rising linearly from 0 at the first. Defaults to 0.
        out_indices (int | Sequence[int]): Stages whose output is returned;
            negative indices count from the end. Defaults to -1.
        out_type (str): ``'featmap'``: a map (B, C_i, H/s_i, W/s_i) per
            chosen stage, for dense heads; ``'avg_featmap'``: its global
            average (B, C_i), for classification (with the default
            ``norm_after_stage`` the last stage's is the official model's
            pooled feature). Defaults to ``'avg_featmap'``.
        norm_after_stage (bool | Sequence[bool], optional): Which stages
            end with a norm; it is applied to the stage's output, which also
            feeds the next stage. Defaults to None: only the last stage, as
            the official model (its final norm).
        norm_cfg (dict): Norms of the transformer blocks and after stages.
            Defaults to ``dict(type='LN', eps=1e-6)`` (official).
        patch_norm_cfg (dict): Norms of the patch embeddings. Defaults to
            ``dict(type='LN', eps=1e-5)`` (official).
        sr_norm_cfg (dict): Norms after GSA's spatial reduction. Defaults to
            ``dict(type='LN', eps=1e-5)`` (official).
        act_cfg (dict): The MLPs' activation. Defaults to
            ``dict(type='GELU')``.
        frozen_stages (int): -1 freezes nothing, 0 the first patch
            embedding, ``k`` the first ``k`` stages (with their patch
            embeddings, position encodings and norms). Defaults to -1.
        norm_eval (bool): Keep BatchNorm layers in eval mode while training.
            Defaults to False.
        with_cp (bool): Recompute each block in the backward pass instead of
            storing its activations (saves memory). Defaults to False.
        init_cfg (dict | list[dict], optional): Initialization config. By
            default (None) :meth:`init_weights` applies the official
            initialization.

    Examples:
        >>> import torch
        >>> from mmtnt.models import PCPVT
        >>> model = PCPVT(arch='s').eval()
        >>> [out.shape for out in model(torch.rand(1, 3, 224, 224))]
        [torch.Size([1, 512])]
        >>> model = PCPVT(arch='s', out_indices=(0, 1, 2, 3),
        ...               out_type='featmap').eval()
        >>> [out.shape for out in model(torch.rand(1, 3, 225, 319))]
        [torch.Size([1, 64, 57, 80]), torch.Size([1, 128, 29, 40]), torch.Size([1, 320, 15, 20]), torch.Size([1, 512, 8, 10])]
    """  # noqa: E501
    arch_zoo = {
        **dict.fromkeys(
            ['s', 'small'], {
                'embed_dims': [64, 128, 320, 512],
                'depths': [3, 4, 6, 3],
                'num_heads': [1, 2, 5, 8],
                'mlp_ratios': [8, 8, 4, 4],
                'sr_ratios': [8, 4, 2, 1]
            }),
        **dict.fromkeys(
            ['b', 'base'], {
                'embed_dims': [64, 128, 320, 512],
                'depths': [3, 4, 18, 3],
                'num_heads': [1, 2, 5, 8],
                'mlp_ratios': [8, 8, 4, 4],
                'sr_ratios': [8, 4, 2, 1]
            }),
        **dict.fromkeys(
            ['l', 'large'], {
                'embed_dims': [64, 128, 320, 512],
                'depths': [3, 8, 27, 3],
                'num_heads': [1, 2, 5, 8],
                'mlp_ratios': [8, 8, 4, 4],
                'sr_ratios': [8, 4, 2, 1]
            }),
    }
    essential_keys = {
        'embed_dims', 'depths', 'num_heads', 'mlp_ratios', 'sr_ratios'
    }
    out_types = ('featmap', 'avg_featmap')

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
        super().__init__(frozen_stages, norm_eval, init_cfg=init_cfg)
        name = type(self).__name__
        self.arch_settings = resolve_arch(arch, self.arch_zoo,
                                          self.essential_keys, name)
        settings = self.arch_settings
        self.num_stages = len(settings['depths'])
        for key, value in settings.items():
            if not isinstance(value, (list, tuple)) or len(value) != \
                    self.num_stages or self.num_stages == 0:
                raise ValueError(
                    f'Every {name} arch setting must be a list with one '
                    f'value per stage; {key}={value!r} does not match '
                    f"depths={settings['depths']!r}.")
        if patch_sizes is None:
            patch_sizes = [4] + [2] * (self.num_stages - 1)
        if len(patch_sizes) != self.num_stages:
            raise ValueError(f'patch_sizes needs {self.num_stages} values, '
                             f'got {patch_sizes!r}.')
        if out_type not in self.out_types:
            raise ValueError(f'Unknown {name} out_type {out_type!r}: choose '
                             f'one of {self.out_types}.')
        if norm_after_stage is None:
            norm_after_stage = [False] * (self.num_stages - 1) + [True]
        elif isinstance(norm_after_stage, bool):
            norm_after_stage = [norm_after_stage] * self.num_stages
        if len(norm_after_stage) != self.num_stages:
            raise ValueError(
                f'norm_after_stage needs {self.num_stages} values, got '
                f'{norm_after_stage!r}.')
        self.embed_dims = list(settings['embed_dims'])
        self.patch_sizes = list(patch_sizes)
        self.sr_ratios = list(settings['sr_ratios'])
        self.norm_after_stage = [bool(n) for n in norm_after_stage]
        self.out_type = out_type
        self.out_indices = normalize_out_indices(out_indices,
                                                 self.num_stages, name)
        self._check_frozen_stages(self.num_stages)
        self.min_input_size = self._min_input_size()

        # Stochastic depth rising linearly from 0 to drop_path_rate.
        num_blocks = sum(settings['depths'])
        drop_path_rates = [
            drop_path_rate * i / max(num_blocks - 1, 1)
            for i in range(num_blocks)
        ]
        self.stages = nn.ModuleList()
        for i in range(self.num_stages):
            dims = self.embed_dims[i]
            blocks = []
            for j in range(settings['depths'][i]):
                attn = self._build_attention(
                    i,
                    j,
                    embed_dims=dims,
                    num_heads=settings['num_heads'][i],
                    qkv_bias=qkv_bias,
                    attn_drop=attn_drop_rate,
                    proj_drop=drop_rate,
                    sr_norm_cfg=sr_norm_cfg)
                blocks.append(
                    TwinsBlock(
                        dims,
                        attn,
                        mlp_ratio=settings['mlp_ratios'][i],
                        drop_rate=drop_rate,
                        drop_path_rate=drop_path_rates.pop(0),
                        norm_cfg=norm_cfg,
                        act_cfg=act_cfg))
            patch_embed = PatchEmbed(
                in_channels if i == 0 else self.embed_dims[i - 1], dims,
                self.patch_sizes[i], patch_norm_cfg)
            norm = build_norm_layer(norm_cfg, dims)[1] \
                if self.norm_after_stage[i] else nn.Identity()
            self.stages.append(
                TwinsStage(patch_embed, blocks, drop_rate, norm, with_cp))
        self.with_cp = with_cp
        # The convolutions see channels-last maps (token sequences viewed as
        # NCHW); weights in the same memory format are not converted on
        # every call (forward and backward). Loading and initialising keep
        # the format.
        self.to(memory_format=torch.channels_last)
        self._register_load_state_dict_pre_hook(self._refuse_foreign_layout)
        self._freeze()

    def _build_attention(self, stage, index, embed_dims, num_heads, qkv_bias,
                         attn_drop, proj_drop, sr_norm_cfg):
        """The attention of block ``index`` of ``stage``: GSA everywhere."""
        return GlobalSubsampledAttention(
            embed_dims,
            num_heads,
            sr_ratio=self.sr_ratios[stage],
            qkv_bias=qkv_bias,
            attn_drop=attn_drop,
            proj_drop=proj_drop,
            norm_cfg=sr_norm_cfg)

    def stage_shapes(self, height, width):
        """The token grid (h, w) of each stage for an input of
        ``height`` x ``width`` pixels."""
        shapes = []
        for p in self.patch_sizes:
            height, width = -(-height // p), -(-width // p)
            shapes.append((height, width))
        return shapes

    def _min_input_size(self):
        side = 1
        while any(
                min(hw) < sr
                for hw, sr in zip(self.stage_shapes(side, side),
                                  self.sr_ratios)):
            side += 1
        return side

    def _check_input(self, x):
        if x.dim() != 4:
            raise ValueError(f'{type(self).__name__} takes images of shape '
                             f'(B, C, H, W), got {tuple(x.shape)}.')
        H, W = x.shape[-2:]
        for i, (hw, sr) in enumerate(
                zip(self.stage_shapes(H, W), self.sr_ratios)):
            if min(hw) < sr:
                raise ValueError(
                    f'Input of {H}x{W} pixels is too small for '
                    f'{type(self).__name__}: stage {i} gets a '
                    f'{hw[0]}x{hw[1]} map, smaller than its spatial '
                    f'reduction (sr_ratio={sr}). Inputs must be at least '
                    f'{self.min_input_size}x{self.min_input_size}.')

    def frozen_parts(self):
        if self.frozen_stages == 0:
            return [self.stages[0].patch_embed]
        return list(self.stages[:self.frozen_stages])

    def init_weights(self):
        """The official initialization, unless ``init_cfg`` says otherwise
        (e.g. ``dict(type='Pretrained', ...)``)."""
        if self.init_cfg is not None:
            super().init_weights()
            return
        for m in self.modules():
            if isinstance(m, nn.Linear):
                trunc_normal_(m.weight, std=.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * \
                    m.out_channels // m.groups
                nn.init.normal_(m.weight, 0, math.sqrt(2.0 / fan_out))
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def _refuse_foreign_layout(self, state_dict, prefix, *args, **kwargs):
        """Point to the converter when a checkpoint in another layout is
        loaded. Called by ``load_state_dict`` before loading."""
        foreign = re.compile(r'(patch_embeds|pos_block|position_encodings|'
                             r'blocks|layers|norm_list)\.|norm_after_stage|'
                             r'stages\.\d+\.\d+\.')
        for key in state_dict:
            if key.startswith(prefix) and foreign.match(key[len(prefix):]):
                raise ValueError(
                    f'This checkpoint is in a foreign Twins layout (official, '
                    f'timm, mmpretrain or mmseg keys such as {key!r}): '
                    'convert it first with `python tools/model_converters/'
                    'twins2mmtnt.py SRC DST`.')

    def forward(self, x):
        self._check_input(x)
        # The first patch embedding is faster on a channels-last image, and
        # then hands out contiguous tokens.
        x = x.contiguous(memory_format=torch.channels_last)
        outs = []
        for i, stage in enumerate(self.stages):
            tokens, hw_shape = stage(x)
            if i in self.out_indices:
                if self.out_type == 'avg_featmap':
                    outs.append(tokens.mean(dim=1))
                else:
                    outs.append(tokens_to_map(tokens, hw_shape).contiguous())
            if i == self.out_indices[-1]:
                break
            x = tokens_to_map(tokens, hw_shape)
        return tuple(outs)


@MODELS.register_module()
class SVT(PCPVT):
    """Twins-SVT.

    A PyTorch implementation of `Twins: Revisiting the Design of Spatial
    Attention in Vision Transformers <https://arxiv.org/abs/2104.13840>`_.
    Like :class:`PCPVT`, but the blocks of each stage alternate between
    locally-grouped self-attention (LSA, even blocks) and global sub-sampled
    attention (GSA, odd blocks).

    LSA pads maps whose sides are not multiples of the window at the right
    and bottom and masks the padding out, so every input size gives the
    attention of the real tokens of each window.

    Args:
        arch (str | dict): ``'s'``/``'small'``, ``'b'``/``'base'``,
            ``'l'``/``'large'``, or a dict of per-stage lists with the keys
            ``embed_dims``, ``depths``, ``num_heads``, ``mlp_ratios``,
            ``sr_ratios`` and ``window_sizes``. Defaults to ``'s'``.
        **kwargs: The other arguments of :class:`PCPVT`.

    Examples:
        >>> import torch
        >>> from mmtnt.models import SVT
        >>> model = SVT(arch='s').eval()
        >>> [out.shape for out in model(torch.rand(1, 3, 224, 224))]
        [torch.Size([1, 512])]
        >>> model = SVT(arch='s', out_indices=(0, 1, 2, 3),
        ...             out_type='featmap').eval()
        >>> [out.shape for out in model(torch.rand(1, 3, 225, 319))]
        [torch.Size([1, 64, 57, 80]), torch.Size([1, 128, 29, 40]), torch.Size([1, 256, 15, 20]), torch.Size([1, 512, 8, 10])]
    """  # noqa: E501
    arch_zoo = {
        **dict.fromkeys(
            ['s', 'small'], {
                'embed_dims': [64, 128, 256, 512],
                'depths': [2, 2, 10, 4],
                'num_heads': [2, 4, 8, 16],
                'mlp_ratios': [4, 4, 4, 4],
                'sr_ratios': [8, 4, 2, 1],
                'window_sizes': [7, 7, 7, 7]
            }),
        **dict.fromkeys(
            ['b', 'base'], {
                'embed_dims': [96, 192, 384, 768],
                'depths': [2, 2, 18, 2],
                'num_heads': [3, 6, 12, 24],
                'mlp_ratios': [4, 4, 4, 4],
                'sr_ratios': [8, 4, 2, 1],
                'window_sizes': [7, 7, 7, 7]
            }),
        **dict.fromkeys(
            ['l', 'large'], {
                'embed_dims': [128, 256, 512, 1024],
                'depths': [2, 2, 18, 2],
                'num_heads': [4, 8, 16, 32],
                'mlp_ratios': [4, 4, 4, 4],
                'sr_ratios': [8, 4, 2, 1],
                'window_sizes': [7, 7, 7, 7]
            }),
    }
    essential_keys = PCPVT.essential_keys | {'window_sizes'}

    def _build_attention(self, stage, index, embed_dims, num_heads, qkv_bias,
                         attn_drop, proj_drop, sr_norm_cfg):
        """LSA in even blocks, GSA in odd ones."""
        if index % 2 == 1:
            return super()._build_attention(stage, index, embed_dims,
                                            num_heads, qkv_bias, attn_drop,
                                            proj_drop, sr_norm_cfg)
        return LocallyGroupedAttention(
            embed_dims,
            num_heads,
            window_size=self.arch_settings['window_sizes'][stage],
            qkv_bias=qkv_bias,
            attn_drop=attn_drop,
            proj_drop=proj_drop)


def _project(attn, x, identity):
    """The output projection of an attention, plus ``identity`` if given."""
    if identity is None:
        return attn.proj_drop(attn.proj(x))
    if can_fuse(x, attn.training):
        return linear_add(x, attn.proj, identity)
    return identity + attn.proj_drop(attn.proj(x))


def _check_heads(embed_dims, num_heads):
    if embed_dims % num_heads != 0:
        raise ValueError(f'embed_dims ({embed_dims}) must be divisible by '
                         f'num_heads ({num_heads}).')
