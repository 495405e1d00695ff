"""TNT: Transformer in Transformer (https://arxiv.org/abs/2103.00112)."""
import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer
from mmengine.model.weight_init import trunc_normal_
from mmengine.utils import to_2tuple

from mmtnt.registry import MODELS
from ..layers import MultiheadAttention, TransformerBlock, drop_path_rates
from ..utils import ceil_div, pad_to_multiple, resize_pos_embed
from .base_backbone import BaseBackbone, TokenGrid


class WordEmbed(nn.Module):
    """Embed the words of each sentence (``patch_size`` square) by a 7x7
    convolution; ``layout='official'`` convolves each sentence on its own,
    ``'legacy'`` the whole image."""

    def __init__(self, in_channels, embed_dims, patch_size, stride, layout):
        super().__init__()
        self.patch_size = patch_size
        self.words_per_side = patch_size // stride
        self.layout = layout
        self.conv = nn.Conv2d(
            in_channels, embed_dims, kernel_size=7, stride=stride, padding=3)

    def forward(self, x):
        """Contiguous words (B * num_sentences, num_words, C)."""
        B, C, H, W = x.shape
        p, k = self.patch_size, self.words_per_side
        h, w = H // p, W // p
        if self.layout == 'official':
            x = x.reshape(B, C, h, p, w, p).permute(0, 2, 4, 1, 3, 5)
            x = self.conv(x.reshape(B * h * w, C, p, p))
            # One copy here instead of one per norm and reshape of the words.
            return x.flatten(2).transpose(1, 2).contiguous()
        x = self.conv(x)
        c = self.conv.out_channels
        x = x.reshape(B, c, h, k, w, k).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(B * h * w, k * k, c)


class WordsToSentence(nn.Module):
    """Project the words of each sentence into one sentence vector;
    ``norm_per_word`` normalizes each word (legacy layout) instead of the
    concatenated words, ``norm_out`` the projection."""

    def __init__(self, inner_dims, num_words, outer_dims, norm_cfg,
                 norm_per_word=False, bias=True, norm_out=True):
        super().__init__()
        self.norm_per_word = norm_per_word
        self.norm_in = build_norm_layer(
            norm_cfg, inner_dims if norm_per_word else inner_dims *
            num_words)[1]
        self.fc = nn.Linear(inner_dims * num_words, outer_dims, bias=bias)
        self.norm_out = build_norm_layer(
            norm_cfg, outer_dims)[1] if norm_out else nn.Identity()

    def forward(self, words, batch_size):
        shape = (batch_size, -1, self.fc.in_features)
        if self.norm_per_word:
            x = self.norm_in(words).reshape(shape)
        else:
            x = self.norm_in(words.reshape(shape))
        return self.norm_out(self.fc(x))


class TNTBlock(nn.Module):
    """An inner block over the words of each sentence (optional), projected
    and added to the sentences after ``num_extra_tokens``, then an outer
    block over the sentences."""

    def __init__(self, inner, words_to_sentence, outer, num_extra_tokens=0):
        super().__init__()
        self.has_inner = inner is not None
        if self.has_inner:
            self.inner = inner
            self.words_to_sentence = words_to_sentence
        self.outer = outer
        self.num_extra_tokens = num_extra_tokens

    def forward(self, words, sentences, *outer_args):
        """Update words (B*N, K, c) and sentences (B, extra + N, C)."""
        if self.has_inner:
            words = self.inner(words)
            update = self.words_to_sentence(words, sentences.shape[0])
            extra = self.num_extra_tokens
            if extra:
                sentences = torch.cat(
                    [sentences[:, :extra], sentences[:, extra:] + update],
                    dim=1)
            else:
                sentences = sentences + update
        return words, self.outer(sentences, *outer_args)


@MODELS.register_module()
class TNT(BaseBackbone):
    """Transformer in Transformer.

    `Transformer in Transformer <https://arxiv.org/abs/2103.00112>`_:
    sentences (``patch_size`` squares) of words run through
    :class:`TNTBlock` blocks (the stages of :class:`BaseBackbone`).

    Args:
        arch (str | dict): ``'s'``/``'small'``, ``'b'``/``'base'``, or a dict
            of settings. Defaults to ``'s'``.
        img_size (int | tuple[int, int]): Size the position embedding is
            stored for (resized to the input). Defaults to 224.
        patch_size (int): Side of a sentence in pixels. Defaults to 16.
        first_stride (int): Stride of the word convolution. Defaults to 4.
        in_channels (int): Channels of the input image. Defaults to 3.
        layout (str): ``'official'`` (timm's ``tnt_s/b_patch16_224``) or
            ``'legacy'`` (mmpretrain's TNT). Defaults to ``'official'``.
        mlp_ratio (float): MLP width over token width. Defaults to 4.
        qkv_bias (bool): Query/key/value projection bias. Defaults to False.
        drop_rate (float): Dropout after projections. Defaults to 0.
        attn_drop_rate (float): Dropout on attention weights. Defaults to 0.
        drop_path_rate (float): Stochastic depth rate. Defaults to 0.
        out_indices (int | Sequence[int]): Blocks to output. Defaults to -1.
        out_type (str): ``'cls_token'`` (B, C), ``'featmap'`` (B, C, H/p,
            W/p) or ``'avg_featmap'`` (B, C). Defaults to ``'cls_token'``.
        final_norm (bool): Normalize the last block's output. Default: True.
        frozen_stages (int): -1 freezes nothing, 0 the embeddings, ``k``
            also the first ``k`` blocks. Defaults to -1.
        norm_eval (bool): See :class:`BaseBackbone`. Defaults to False.
        with_cp (bool): See :class:`BaseBackbone`. Defaults to False.
        norm_cfg (dict): The norm layer. Defaults to ``dict(type='LN')``.
        act_cfg (dict): The MLPs' activation. Defaults to GELU.
        init_cfg (dict | list[dict], optional): Initialization config.

    Examples:
        >>> from mmtnt.models import TNT
        >>> model = TNT(arch='s').eval()
        >>> [out.shape for out in model(torch.rand(1, 3, 224, 224))]
        [torch.Size([1, 384])]
    """
    arch_zoo = {
        **dict.fromkeys(['s', 'small'], dict(
            embed_dims_outer=384, embed_dims_inner=24, num_layers=12,
            num_heads_outer=6, num_heads_inner=4)),
        **dict.fromkeys(['b', 'base'], dict(
            embed_dims_outer=640, embed_dims_inner=40, num_layers=12,
            num_heads_outer=10, num_heads_inner=4)),
    }
    essential_keys = {
        'embed_dims_outer', 'embed_dims_inner', 'num_layers',
        'num_heads_outer', 'num_heads_inner'
    }
    layouts = ('official', 'legacy')
    out_types = ('cls_token', 'featmap', 'avg_featmap')
    foreign_keys = r'(outer_pos|patch_pos|pixel_pos|layers\.0\.)'
    converter = 'tnt2mmtnt.py'
    num_extra_tokens = 1  # the class token
    resize_impl = 'interpolate'  # mmtnt.models.set_resize_impl
    embedding_names = ('word_embed', 'word_pos', 'sentence_proj',
                       'cls_token', 'sentence_pos', 'drop_after_pos')

    def __init__(self,
                 arch='s',
                 img_size=224,
                 patch_size=16,
                 first_stride=4,
                 in_channels=3,
                 layout='official',
                 mlp_ratio=4.,
                 qkv_bias=False,
                 drop_rate=0.,
                 attn_drop_rate=0.,
                 drop_path_rate=0.,
                 out_indices=-1,
                 out_type='cls_token',
                 final_norm=True,
                 frozen_stages=-1,
                 norm_eval=False,
                 with_cp=False,
                 norm_cfg=dict(type='LN'),
                 act_cfg=dict(type='GELU'),
                 init_cfg=[
                     dict(type='TruncNormal', layer='Linear', std=.02),
                     dict(type='Constant', layer='LayerNorm', val=1., bias=0.)
                 ]):
        super().__init__(arch, out_indices, out_type, frozen_stages,
                         norm_eval, with_cp, init_cfg)
        if layout not in self.layouts:
            raise ValueError(f'Unknown TNT layout {layout!r}: choose one of '
                             f'{self.layouts}.')
        if patch_size % first_stride != 0:
            raise ValueError(f'first_stride ({first_stride}) must divide '
                             f'patch_size ({patch_size}).')
        settings = self.arch_settings
        inner_dims = settings['embed_dims_inner']
        outer_dims = settings['embed_dims_outer']
        self.embed_dims = outer_dims
        self.patch_size = patch_size
        self.layout = layout
        self.final_norm = final_norm
        img_h, img_w = to_2tuple(img_size)
        if img_h % patch_size or img_w % patch_size:
            raise ValueError(
                f'TNT img_size must be a multiple of patch_size='
                f'{patch_size}, got {img_h}x{img_w}.')
        self.pos_grid = (img_h // patch_size, img_w // patch_size)
        num_words = (patch_size // first_stride)**2

        self.word_embed = WordEmbed(in_channels, inner_dims, patch_size,
                                    first_stride, layout)
        self.word_pos = nn.Parameter(torch.zeros(1, num_words, inner_dims))
        self.sentence_proj = WordsToSentence(inner_dims, num_words,
                                             outer_dims, norm_cfg)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, outer_dims))
        num_sentences = self.pos_grid[0] * self.pos_grid[1]
        self.sentence_pos = nn.Parameter(
            torch.zeros(1, 1 + num_sentences, outer_dims))
        self.drop_after_pos = nn.Dropout(drop_rate)

        attn_cfg = dict(
            qkv_bias=qkv_bias, attn_drop=attn_drop_rate, proj_drop=drop_rate)

        def transformer(dims, num_heads, drop_path_rate):
            return TransformerBlock(
                dims,
                MultiheadAttention(dims, num_heads, **attn_cfg),
                mlp_ratio=mlp_ratio,
                drop_rate=drop_rate,
                drop_path_rate=drop_path_rate,
                norm_cfg=norm_cfg,
                act_cfg=act_cfg)

        official = layout == 'official'
        rates = drop_path_rates(drop_path_rate, self.num_stages)
        self.blocks = nn.ModuleList(
            TNTBlock(
                transformer(inner_dims, settings['num_heads_inner'], rate),
                WordsToSentence(
                    inner_dims, num_words, outer_dims, norm_cfg,
                    norm_per_word=not official, bias=not official,
                    norm_out=official),
                transformer(outer_dims, settings['num_heads_outer'], rate),
                num_extra_tokens=self.num_extra_tokens)
            for rate in rates[:self.num_built_stages])
        self.norm = self.build_final_norm(final_norm, norm_cfg, outer_dims)

        trunc_normal_(self.word_pos, std=.02)
        trunc_normal_(self.cls_token, std=.02)
        trunc_normal_(self.sentence_pos, std=.02)
        self._freeze()

    def count_stages(self, settings):
        return settings['num_layers']

    def stage_modules(self):
        return list(self.blocks)

    def stage_token_grids(self, height, width):
        """The sentence grid (of the padded input) after each block."""
        p = self.patch_size
        grid = TokenGrid((ceil_div(height, p), ceil_div(width, p)), p,
                         self.embed_dims)
        return [grid] * self.num_built_stages

    def token_layer(self):
        last = self.out_indices[-1]
        # The class token gathers the sentences only in the last attention.
        if self.out_type == 'cls_token':
            return f'blocks.{last}.outer.norm1'
        if last == self.num_stages - 1 and self.final_norm:
            return 'norm'
        return f'blocks.{last}.outer'

    @property
    def num_blocks(self):
        return len(self.blocks)

    def block_depth(self, name):
        """Block ``i`` at depth ``i + 1``."""
        parts = name.split('.')
        if parts[0] == 'blocks':
            return int(parts[1]) + 1
        return None

    def adapt_state_dict(self, state_dict, prefix):
        """Check the checkpoint's layout; resize its position embedding."""
        norm_key = prefix + 'blocks.0.words_to_sentence.norm_in.weight'
        if norm_key in state_dict:
            legacy = state_dict[norm_key].numel() == self.word_pos.shape[-1]
            ckpt_layout = 'legacy' if legacy else 'official'
            if ckpt_layout != self.layout:
                raise ValueError(
                    f'The checkpoint holds TNT weights of '
                    f"layout='{ckpt_layout}' but the model was built with "
                    f"layout='{self.layout}': set "
                    f"layout='{ckpt_layout}' in the backbone config.")
        self.resize_loaded_pos_embed(state_dict, prefix + 'sentence_pos',
                                     self.pos_grid)

    def _format_output(self, sentences, grid):
        if self.out_type == 'cls_token':
            return sentences[:, 0]
        return self.format_tokens(sentences[:, 1:], grid)

    def forward(self, x):
        B = x.shape[0]
        grid = self.check_input(x)[0].hw
        words = self.word_embed(pad_to_multiple(x, self.patch_size))
        words = words + self.word_pos
        sentences = torch.cat(
            [self.cls_token.expand(B, -1, -1),
             self.sentence_proj(words, B)],
            dim=1)
        sentences = sentences + resize_pos_embed(
            self.sentence_pos, self.pos_grid, grid, self.num_extra_tokens,
            self.resize_impl)
        sentences = self.drop_after_pos(sentences)

        outs = []
        for i, block in enumerate(self.blocks):
            words, sentences = self.run_block(block, words, sentences)
            if i == self.num_stages - 1:
                sentences = self.norm(sentences)
            if i in self.out_indices:
                outs.append(self._format_output(sentences, grid))
        return tuple(outs)
