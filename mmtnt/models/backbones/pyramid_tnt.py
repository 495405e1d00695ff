"""PyramidTNT (https://arxiv.org/abs/2201.00978)."""
from collections import OrderedDict

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model.weight_init import trunc_normal_
from mmengine.utils import to_2tuple

from mmtnt.registry import MODELS
from ..layers import (MultiheadAttention, SpatialReductionAttention,
                      TransformerBlock, tokens_to_map)
from ..utils import (ceil_div, check_stage_lists, pad_to_multiple,
                     resize_attention_bias, resize_pos_embed, square_grid)
from .base_backbone import BaseBackbone, TokenGrid, stage_drop_path_rates
from .tnt import TNTBlock, WordsToSentence

# 4x4 words a sentence; words at 1/2 of the input, sentences at 1/8 / 2**i.
WORDS_PER_SIDE = 4
WORD_STRIDE = 2
SENTENCE_STRIDE = WORD_STRIDE * WORDS_PER_SIDE
NUM_STAGES = 4


def arch_setting(depths, outer_dims, num_heads_outer):
    """A released arch: stage widths and heads x1, 2, 4, 4; words of 1/16
    the channels and half the heads."""
    dims = [outer_dims * scale for scale in (1, 2, 4, 4)]
    heads = [num_heads_outer * scale for scale in (1, 2, 4, 4)]
    return dict(
        depths=depths,
        outer_dims=dims,
        inner_dims=[d // 16 for d in dims],
        num_heads_outer=heads,
        num_heads_inner=[h // 2 for h in heads])


def conv_norm_act(in_channels, out_channels, kernel_size, stride, padding,
                  norm_cfg, act_cfg, transposed=False):
    """A bias-free convolution, a norm and an activation."""
    conv_type = nn.ConvTranspose2d if transposed else nn.Conv2d
    conv = conv_type(in_channels, out_channels, kernel_size, stride,
                     padding, bias=False)
    return nn.Sequential(
        OrderedDict(
            conv=conv,
            norm=build_norm_layer(norm_cfg, out_channels)[1],
            act=build_activation_layer(act_cfg)))


class ConvStem(nn.Module):
    """The convolutional stem: a word map at 1/2 of the input (4x4 words a
    sentence) and a sentence map at 1/8, each conv with a norm and ReLU."""

    def __init__(self, in_channels, inner_dims, outer_dims, norm_cfg):
        super().__init__()
        relu = dict(type='ReLU', inplace=True)
        self.shared = conv_norm_act(in_channels, inner_dims * 2, 3, 2, 1,
                                    norm_cfg, relu)
        self.word_branch = conv_norm_act(inner_dims * 2, inner_dims, 3, 1, 1,
                                         norm_cfg, relu)
        dims = [inner_dims * 2, inner_dims * 4, inner_dims * 8, outer_dims]
        self.sentence_branch = nn.Sequential(*(
            conv_norm_act(dims[i], dims[i + 1], 3, stride, 1, norm_cfg, relu)
            for i, stride in enumerate((2, 2, 1))))

    def forward(self, x):
        """Words (B*h*w, 16, c) and sentences (B, h*w, C) of (B, 3, 8h, 8w)."""
        x = self.shared(x)
        words = self.word_branch(x).permute(0, 2, 3, 1)  # B, H, W, c
        B, H, W, c = words.shape
        k = WORDS_PER_SIDE
        h, w = H // k, W // k
        # Word (ki, kj) of sentence (i, j) is pixel (k*i + ki, k*j + kj).
        words = words.reshape(B, h, k, w, k, c).permute(0, 1, 3, 2, 4, 5)
        words = words.reshape(B * h * w, k * k, c)
        sentences = self.sentence_branch(x).flatten(2).transpose(1, 2)
        return words, sentences


class SentenceAggregation(nn.Module):
    """Halve the sentence grid: a norm, then a 3x3 stride-2 convolution."""

    def __init__(self, in_dims, out_dims, norm_cfg):
        super().__init__()
        self.norm = build_norm_layer(norm_cfg, in_dims)[1]
        self.conv = nn.Conv2d(in_dims, out_dims, 3, stride=2, padding=1)

    def forward(self, sentences, grid):
        B, _, C = sentences.shape
        x = self.norm(sentences).reshape(B, *grid, C).permute(0, 3, 1, 2)
        return self.conv(x).flatten(2).transpose(1, 2)


class WordAggregation(SentenceAggregation):
    """Merge the 8x8 words of each 2x2 group of sentences into 4x4 words by
    the convolution of :class:`SentenceAggregation`; an odd grid is padded
    with zero sentences at the bottom/right, as the official code does."""

    def forward(self, words, grid):
        h, w = grid
        k = WORDS_PER_SIDE
        c = words.shape[-1]
        x = self.norm(words).reshape(-1, h, w, k, k, c)
        x = pad_to_multiple(x, 2, dims=(1, 2))
        B, h2, w2 = x.shape[0], x.shape[1] // 2, x.shape[2] // 2
        # -> (B, h2, w2, dh, ki, dw, kj, c): each group's 8x8 word map.
        x = x.reshape(B, h2, 2, w2, 2, k, k, c).permute(0, 1, 3, 2, 5, 4, 6, 7)
        x = x.reshape(B * h2 * w2, 2 * k, 2 * k, c).permute(0, 3, 1, 2)
        x = self.conv(x).permute(0, 2, 3, 1)  # B*h2*w2, k, k, out_dims
        return x.reshape(B * h2 * w2, k * k, -1)


class WordsLayerNorm(nn.LayerNorm):
    """A LayerNorm over all the words of a sentence together."""

    def __init__(self, embed_dims, num_words, eps=1e-5):
        super().__init__(embed_dims * num_words, eps=eps)

    def forward(self, words):
        return super().forward(words.flatten(-2)).reshape(words.shape)


class PyramidTNTStage(nn.Module):
    """A stage: aggregation (after the first), then :class:`TNTBlock`
    blocks whose pooled sentence attention adds a bias shared by the stage.
    As officially, the inner block runs in block 0 (and 1 if depth > 6).

    ``in_dims``: sentence and word channels of the previous stage, or None.

    The bias is resized over the query grid, then the key grid, by matrix
    products (``'matrices'``, the same function as ``F.interpolate``):
    inductor fuses two chained bicubic interpolations into one kernel of
    16x16 taps whose C++ takes minutes to compile; and on one CPU thread
    the products ran stage 0's resize of PyramidTNT-S at 800x1344 (forward
    and backward) in 0.5 s instead of 3.4 s.
    """
    resize_impl = 'matrices'  # mmtnt.models.set_resize_impl

    def __init__(self, in_dims, outer_dims, inner_dims, num_heads_outer,
                 num_heads_inner, sr_ratio, pos_grid, drop_path_rates,
                 norm_cfg, attn_cfg, block_cfg):
        super().__init__()
        num_words = WORDS_PER_SIDE**2
        self.has_merge = in_dims is not None
        if self.has_merge:
            in_outer, in_inner = in_dims
            self.word_merge = WordAggregation(in_inner, inner_dims, norm_cfg)
            self.sentence_merge = SentenceAggregation(in_outer, outer_dims,
                                                      norm_cfg)
        self.sr_ratio = sr_ratio
        self.pos_grid = tuple(pos_grid)
        self.pos_key_grid = self.key_grid(pos_grid)
        self.relative_pos = nn.Parameter(
            torch.randn(1, num_heads_outer, pos_grid[0] * pos_grid[1],
                        self.pos_key_grid[0] * self.pos_key_grid[1]))
        words_norm_cfg = dict(
            norm_cfg, type=WordsLayerNorm, num_words=num_words)
        depth = len(drop_path_rates)
        self.blocks = nn.ModuleList()
        for j, rate in enumerate(drop_path_rates):
            inner = words_to_sentence = None
            if j == 0 or (j == 1 and depth > 6):
                inner = TransformerBlock(
                    inner_dims,
                    MultiheadAttention(inner_dims, num_heads_inner,
                                       **attn_cfg),
                    drop_path_rate=rate,
                    norm_cfg=words_norm_cfg,
                    **block_cfg)
                words_to_sentence = WordsToSentence(
                    inner_dims, num_words, outer_dims, norm_cfg, bias=False)
            outer = TransformerBlock(
                outer_dims,
                SpatialReductionAttention(
                    outer_dims,
                    num_heads_outer,
                    sr_ratio=sr_ratio,
                    reduction='pool',
                    norm_cfg=norm_cfg,
                    **attn_cfg),
                drop_path_rate=rate,
                norm_cfg=norm_cfg,
                **block_cfg)
            self.blocks.append(TNTBlock(inner, words_to_sentence, outer))

    def key_grid(self, grid):
        """The key grid (after spatial reduction) of a sentence grid."""
        return grid[0] // self.sr_ratio, grid[1] // self.sr_ratio

    def attention_bias(self, grid):
        """The learned attention bias resized to a sentence ``grid``."""
        return resize_attention_bias(self.relative_pos, self.pos_grid,
                                     self.pos_key_grid, grid,
                                     self.key_grid(grid), self.resize_impl)

    def forward(self, words, sentences, in_grid, grid, run_block):
        """Update words and sentences from ``in_grid`` to ``grid``."""
        if self.has_merge:
            words = self.word_merge(words, in_grid)
            sentences = self.sentence_merge(sentences, in_grid)
        bias = self.attention_bias(grid)
        for block in self.blocks:
            words, sentences = run_block(block, words, sentences, grid, bias)
        return words, sentences


@MODELS.register_module()
class PyramidTNT(BaseBackbone):
    """PyramidTNT: Transformer in Transformer with a pyramid architecture.

    `PyramidTNT <https://arxiv.org/abs/2201.00978>`_: a convolutional stem,
    then four stages at strides 8, 16, 32 and 64. Position terms stored for
    ``img_size`` are resized to the actual grids (and checkpoints' to it).

    Args:
        arch (str | dict): ``'ti'``, ``'s'``, ``'m'``, ``'b'`` (or full
            names), or a dict of per-stage lists. Defaults to ``'s'``.
        img_size (int | tuple[int, int], optional): Size the position
            terms are stored for. Defaults to the arch's training size.
        in_channels (int): Channels of the input image. Defaults to 3.
        sr_ratios (Sequence[int]): Defaults to (4, 2, 1, 1).
        mlp_ratio (float): MLP width over token width. Defaults to 4.
        qkv_bias (bool): Query/key/value projection bias. Defaults to False.
        drop_rate (float): Dropout after projections. Defaults to 0.
        attn_drop_rate (float): Dropout on attention weights. Defaults to 0.
        drop_path_rate (float): Stochastic depth rate. Defaults to 0.
        out_indices (int | Sequence[int]): Stages to output. Defaults to -1.
        out_type (str): ``'avg_featmap'`` (B, C) or ``'featmap'``
            (B, C, H/s, W/s). Defaults to ``'avg_featmap'``.
        upsample_featmaps (bool): Upsample each map by 2 as the paper's
            detectors (strides 4 to 32); ``'featmap'`` only. Default: False.
        final_norm (bool): Normalize the last stage's output. Default: True.
        frozen_stages (int): -1 freezes nothing, 0 the stem and position
            embeddings, ``k`` also ``k`` stages. Defaults to -1.
        norm_eval (bool): See :class:`BaseBackbone`. Defaults to False.
        with_cp (bool): See :class:`BaseBackbone`. Defaults to False.
        norm_cfg (dict): The norm layer. Defaults to ``dict(type='LN')``.
        conv_norm_cfg (dict): The convolutions' norm. Defaults to BN.
        act_cfg (dict): The MLPs' activation. Defaults to GELU.
        init_cfg (dict | list[dict], optional): Defaults to the official.

    Examples:
        >>> from mmtnt.models import PyramidTNT
        >>> model = PyramidTNT(arch='s').eval()
        >>> [out.shape for out in model(torch.rand(1, 3, 256, 256))]
        [torch.Size([1, 512])]
    """
    arch_zoo = {
        **dict.fromkeys(['ti', 'tiny'], arch_setting([2, 6, 3, 2], 80, 2)),
        **dict.fromkeys(['s', 'small'], arch_setting([2, 8, 4, 2], 128, 4)),
        **dict.fromkeys(['m', 'medium'], arch_setting([2, 8, 6, 2], 192, 4)),
        **dict.fromkeys(['b', 'base'], arch_setting([2, 10, 6, 2], 256, 4)),
    }
    essential_keys = {
        'depths', 'outer_dims', 'inner_dims', 'num_heads_outer',
        'num_heads_inner'
    }
    # The input size each arch was trained at.
    train_img_size = {'ti': 192, 'tiny': 192}
    default_img_size = 256
    out_types = ('avg_featmap', 'featmap')
    embedding_names = ('stem', 'word_pos', 'sentence_pos', 'pos_drop')
    foreign_keys = r'(outer_pos|patch_embed\.|word_merges\.)'
    converter = 'pyramid_tnt2mmtnt.py'
    resize_impl = 'interpolate'  # mmtnt.models.set_resize_impl

    def __init__(self,
                 arch='s',
                 img_size=None,
                 in_channels=3,
                 sr_ratios=(4, 2, 1, 1),
                 mlp_ratio=4.,
                 qkv_bias=False,
                 drop_rate=0.,
                 attn_drop_rate=0.,
                 drop_path_rate=0.,
                 out_indices=-1,
                 out_type='avg_featmap',
                 upsample_featmaps=False,
                 final_norm=True,
                 frozen_stages=-1,
                 norm_eval=False,
                 with_cp=False,
                 norm_cfg=dict(type='LN'),
                 conv_norm_cfg=dict(type='BN'),
                 act_cfg=dict(type='GELU'),
                 init_cfg=[
                     dict(type='TruncNormal', layer='Linear', std=.02),
                     dict(type='Kaiming', layer=['Conv2d', 'ConvTranspose2d'],
                          mode='fan_out', nonlinearity='relu',
                          distribution='normal'),
                     dict(type='Constant', layer='LayerNorm', val=1., bias=0.)
                 ]):
        super().__init__(arch, out_indices, out_type, frozen_stages,
                         norm_eval, with_cp, init_cfg)
        self._check_arch(self.arch_settings, sr_ratios)
        if upsample_featmaps and out_type != 'featmap':
            raise ValueError('upsample_featmaps=True needs '
                             "out_type='featmap'.")
        settings = self.arch_settings
        outer_dims, inner_dims = settings['outer_dims'], settings['inner_dims']
        self.sr_ratios = tuple(sr_ratios)
        self.upsample_featmaps = upsample_featmaps
        self.final_norm = final_norm
        self.embed_dims = outer_dims[-1]

        if img_size is None:
            img_size = self.train_img_size.get(
                arch.lower() if isinstance(arch, str) else None,
                self.default_img_size)
        self.img_size = tuple(to_2tuple(img_size))
        if min(self.img_size) < self.min_input_size:
            raise ValueError(
                f'PyramidTNT needs an img_size of at least '
                f'{self.min_input_size} pixels a side (the smallest input), '
                f'got {self.img_size}.')
        self.pos_grids = [
            grid.hw for grid in self.stage_token_grids(*self.img_size)
        ]
        num_words = WORDS_PER_SIDE**2

        self.stem = ConvStem(in_channels, inner_dims[0], outer_dims[0],
                             conv_norm_cfg)
        self.word_pos = nn.Parameter(torch.zeros(1, num_words, inner_dims[0]))
        h0, w0 = self.pos_grids[0]
        self.sentence_pos = nn.Parameter(
            torch.zeros(1, h0 * w0, outer_dims[0]))
        self.pos_drop = nn.Dropout(drop_rate)

        rates = stage_drop_path_rates(drop_path_rate, settings['depths'])
        attn_cfg = dict(
            qkv_bias=qkv_bias, attn_drop=attn_drop_rate, proj_drop=drop_rate)
        block_cfg = dict(
            mlp_ratio=mlp_ratio, drop_rate=drop_rate, act_cfg=act_cfg)
        self.stages = nn.ModuleList()
        for i in range(self.num_built_stages):
            stage = PyramidTNTStage(
                None if i == 0 else (outer_dims[i - 1], inner_dims[i - 1]),
                outer_dims[i],
                inner_dims[i],
                settings['num_heads_outer'][i],
                settings['num_heads_inner'][i],
                sr_ratio=self.sr_ratios[i],
                pos_grid=self.pos_grids[i],
                drop_path_rates=rates[i],
                norm_cfg=norm_cfg,
                attn_cfg=attn_cfg,
                block_cfg=block_cfg)
            self.stages.append(stage)
        self.norm = self.build_final_norm(final_norm, norm_cfg,
                                          outer_dims[-1])

        if upsample_featmaps:
            gelu = dict(type='GELU')
            for i in self.out_indices:
                dims = outer_dims[i]
                self.add_module(
                    f'upsample{i}',
                    nn.Sequential(
                        conv_norm_act(dims, dims, 2, 2, 0, conv_norm_cfg,
                                      gelu, transposed=True),
                        conv_norm_act(dims, dims, 3, 1, 1, conv_norm_cfg,
                                      gelu)))

        trunc_normal_(self.word_pos, std=.02)
        trunc_normal_(self.sentence_pos, std=.02)
        self._freeze()

    def count_stages(self, settings):
        return NUM_STAGES

    def _check_arch(self, settings, sr_ratios):
        check_stage_lists(
            dict(settings, sr_ratios=sr_ratios), self.num_stages,
            'PyramidTNT')
        for key, heads_key in (('outer_dims', 'num_heads_outer'),
                               ('inner_dims', 'num_heads_inner')):
            for dims, heads in zip(settings[key], settings[heads_key]):
                if dims % heads:
                    raise ValueError(
                        f'PyramidTNT {key} {settings[key]} must be '
                        f'divisible by {heads_key} {settings[heads_key]}.')

    def stage_token_grids(self, height, width):
        """Sentence grids: the padded input at 1/8, halved (rounding up) by
        each aggregation."""
        h = ceil_div(height, SENTENCE_STRIDE)
        w = ceil_div(width, SENTENCE_STRIDE)
        grids = []
        for i in range(self.num_built_stages):
            if i:
                h, w = ceil_div(h, 2), ceil_div(w, 2)
            grids.append(
                TokenGrid((h, w), SENTENCE_STRIDE * 2**i,
                          self.arch_settings['outer_dims'][i],
                          self.sr_ratios[i]))
        return grids

    def token_grids(self, height, width):
        """With ``upsample_featmaps``, the upsampled maps' grids."""
        grids = super().token_grids(height, width)
        if not self.upsample_featmaps:
            return grids
        return [
            grid._replace(
                hw=(ceil_div(height, grid.stride // 2),
                    ceil_div(width, grid.stride // 2)),
                stride=grid.stride // 2) for grid in grids
        ]

    def token_layer(self):
        last = self.out_indices[-1]
        if last == self.num_stages - 1 and self.final_norm:
            return 'norm'
        depth = self.arch_settings['depths'][last]
        return f'stages.{last}.blocks.{depth - 1}.outer'

    def block_depth(self, name):
        """A stage's aggregations and bias go with the block before it."""
        return self.stage_depth(name, lambda i, part: 0)

    def adapt_state_dict(self, state_dict, prefix):
        """Resize the position terms of a checkpoint to ``img_size``."""
        self.resize_loaded_pos_embed(state_dict, prefix + 'sentence_pos',
                                     self.pos_grids[0])
        for i, stage in enumerate(self.stages):
            key = f'{prefix}stages.{i}.relative_pos'
            if key not in state_dict:
                continue
            bias = state_dict[key]
            if bias.shape[2:] == stage.relative_pos.shape[2:]:
                continue
            name = f'stage {i}\'s attention bias'
            state_dict[key] = resize_attention_bias(
                bias, square_grid(bias.shape[2], name),
                square_grid(bias.shape[3], name), stage.pos_grid,
                stage.pos_key_grid)

    def _format_output(self, sentences, grid, index, out_grid):
        if not self.upsample_featmaps:
            return self.format_tokens(sentences, grid)
        x = getattr(self, f'upsample{index}')(tokens_to_map(sentences, grid))
        # Crop to ceil(input / stride) where padding made the grid odd.
        h, w = out_grid.hw
        return x[:, :, :h, :w].contiguous()

    def forward(self, x):
        grids = [grid.hw for grid in self.check_input(x)]
        out_grids = self.token_grids(*x.shape[-2:])
        words, sentences = self.stem(pad_to_multiple(x, SENTENCE_STRIDE))
        words = words + self.word_pos
        pos = resize_pos_embed(self.sentence_pos, self.pos_grids[0], grids[0],
                               impl=self.resize_impl)
        sentences = sentences + self.pos_drop(pos)

        outs = []
        for i, stage in enumerate(self.stages):
            words, sentences = stage(words, sentences,
                                     grids[i - 1] if i else None, grids[i],
                                     self.run_block)
            if i == self.num_stages - 1:
                sentences = self.norm(sentences)
            if i in self.out_indices:
                out_grid = out_grids[self.out_indices.index(i)]
                outs.append(
                    self._format_output(sentences, grids[i], i, out_grid))
        return tuple(outs)
