import functools
import re
from typing import NamedTuple, Tuple

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmengine.model import BaseModule
from torch.nn.modules.batchnorm import _BatchNorm

from ..layers import tokens_to_map


class TokenGrid(NamedTuple):
    """Where the tokens of a stage (or an output) lie for an input size.

    Attributes:
        hw (tuple[int, int]): The grid (h, w) of tokens, row-major; for an
            input of H x W pixels a grid of stride ``s`` is
            ``ceil(H / s) x ceil(W / s)`` (the input is padded, never
            cropped).
        stride (int): Input pixels per token along each side.
        channels (int): Channels of a token.
        min_side (int): The smallest grid side the stage takes (its spatial
            reduction, ``sr_ratio``); 1 where any grid will do.
    """
    hw: Tuple[int, int]
    stride: int
    channels: int
    min_side: int = 1


class BaseBackbone(BaseModule):
    """What mmtnt's backbones share: output types, frozen stages,
    ``norm_eval``, ``with_cp``, the checkpoint check, and one geometry
    contract that every tool reads instead of knowing the family.

    The geometry: a subclass gives the :class:`TokenGrid` of each stage it
    runs for an input size (:meth:`stage_token_grids`; the blocks of an
    isotropic model are its stages). From these follow the grids of the
    outputs (:meth:`token_grids`), the smallest input (:attr:`min_input_size`)
    and the check of an input (:meth:`check_input`). Tokens are laid out
    row-major after :attr:`num_extra_tokens` extra ones (a class token);
    :meth:`token_layer` names the module whose tokens the last output is
    made from.

    A subclass lists what ``frozen_stages`` freezes in :meth:`frozen_parts`;
    frozen modules stay in eval mode and their parameters get no gradient,
    also after ``model.train()``. It runs its blocks through
    :meth:`run_block`, so that ``with_cp`` may be changed after the model is
    built. Checkpoint keys matching :attr:`foreign_keys` (another
    implementation's layout) are refused with a pointer to
    :attr:`converter`; :meth:`adapt_state_dict` may change the others
    before they load.

    Args:
        out_type (str): What is returned for each output, one of
            :attr:`out_types`.
        frozen_stages (int): Stages (blocks for isotropic models) to freeze;
            -1 freezes nothing, 0 only the stem. Defaults to -1.
        norm_eval (bool): Keep every BatchNorm layer in eval mode while
            training (frozen running statistics). Defaults to False.
        with_cp (bool): Recompute each block in the backward pass instead of
            storing its activations (saves memory). Defaults to False.
        init_cfg (dict | list[dict], optional): Initialization config.
    """
    #: The ``out_type`` values the backbone takes.
    out_types = ('featmap', 'avg_featmap')
    #: Keys (after the prefix) of the layouts the converter reads.
    foreign_keys = None
    #: The script that converts those layouts.
    converter = None
    #: Tokens before the grid's in a stage's token sequence.
    num_extra_tokens = 0

    def __init__(self, out_type, frozen_stages=-1, norm_eval=False,
                 with_cp=False, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        if out_type not in self.out_types:
            raise ValueError(f'Unknown {type(self).__name__} out_type '
                             f'{out_type!r}: choose one of '
                             f'{self.out_types}.')
        self.out_type = out_type
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval
        self.with_cp = with_cp
        self._register_load_state_dict_pre_hook(self._check_state_dict)

    def frozen_parts(self):
        """Modules and parameters that ``frozen_stages`` freezes.

        Returns:
            list[nn.Module | nn.Parameter]
        """
        raise NotImplementedError

    def run_block(self, block, *args):
        """``block(*args)``; with ``with_cp`` while training, recomputed in
        the backward pass instead of keeping its activations."""
        if self.with_cp and self.training and torch.is_grad_enabled():
            return cp.checkpoint(block, *args, use_reentrant=False)
        return block(*args)

    def format_tokens(self, tokens, hw_shape):
        """Tokens (B, H*W, C) as the ``out_type`` output: a map
        (B, C, H, W) for ``'featmap'``, their mean (B, C) for
        ``'avg_featmap'``."""
        if self.out_type == 'avg_featmap':
            return tokens.mean(dim=1)
        return tokens_to_map(tokens, hw_shape).contiguous()

    def stage_token_grids(self, height, width):
        """The token grid of every stage the backbone runs, for an input of
        ``height`` x ``width`` pixels.

        Args:
            height (int): Input height in pixels.
            width (int): Input width in pixels.

        Returns:
            list[TokenGrid]: One per stage, in order.
        """
        raise NotImplementedError

    def token_grids(self, height, width):
        """The grid of each output (``out_indices``, in order) for an input
        of ``height`` x ``width`` pixels: where its tokens, or the cells
        of its ``'featmap'`` map, lie.

        Args:
            height (int): Input height in pixels.
            width (int): Input width in pixels.

        Returns:
            list[TokenGrid]: One per output.

        Examples:
            >>> from mmtnt.models import PCPVT
            >>> model = PCPVT(arch='s', out_indices=(0, 3))
            >>> [(g.hw, g.stride, g.channels)
            ...  for g in model.token_grids(100, 132)]
            [((25, 33), 4, 64), ((4, 5), 32, 512)]
        """
        grids = self.stage_token_grids(height, width)
        return [grids[i] for i in self.out_indices]

    @functools.cached_property
    def min_input_size(self):
        """The smallest side ``s`` of an ``s`` x ``s`` input whose every
        stage grid is at least its ``min_side`` a side (inputs must be at
        least that high and wide)."""
        side = 1
        while not all(
                min(grid.hw) >= grid.min_side
                for grid in self.stage_token_grids(side, side)):
            side += 1
        return side

    def check_input(self, x):
        """Check that images ``x`` (B, C, H, W) fit the backbone.

        Args:
            x (Tensor): The input.

        Returns:
            list[TokenGrid]: The stage grids of the input
            (:meth:`stage_token_grids`).

        Raises:
            ValueError: If ``x`` is not 4-D, or a stage's grid would be
                smaller than its ``min_side``.
        """
        name = type(self).__name__
        if x.dim() != 4:
            raise ValueError(f'{name} takes images of shape (B, C, H, W), '
                             f'got {tuple(x.shape)}.')
        height, width = x.shape[-2:]
        grids = self.stage_token_grids(height, width)
        for i, grid in enumerate(grids):
            (h, w), side = grid.hw, grid.min_side
            if h < side or w < side:
                raise ValueError(
                    f'Input of {height}x{width} pixels is too small for '
                    f'{name}: stage {i} gets a {h}x{w} token grid, smaller '
                    f'than its spatial reduction (sr_ratio={side}). Inputs '
                    f'must be at least {self.min_input_size}x'
                    f'{self.min_input_size}.')
        return grids

    def token_layer(self):
        """The module whose output tokens (B, extra + h*w, C) the last
        output is made from, by its name in the backbone (a class
        activation map's default target).

        Returns:
            str: E.g. ``'norm'`` or ``'stages.3.norm'``.
        """
        raise NotImplementedError

    #: Top-level modules and parameters (names in the backbone) that run
    #: before the first block: depth 0 of :meth:`get_layer_depth`, and what
    #: ``frozen_stages=0`` freezes where the model lists them.
    embedding_names = ()

    def embedding_parts(self):
        """The modules and parameters named in :attr:`embedding_names`.

        Returns:
            list[nn.Module | nn.Parameter]
        """
        return [getattr(self, name) for name in self.embedding_names]

    @property
    def num_blocks(self):
        """The number of blocks built (all stages together)."""
        return sum(len(stage.blocks) for stage in self.stages)

    def get_layer_depth(self, param_name, prefix=''):
        """The layer-wise depth of a parameter, as mmpretrain's
        ``VisionTransformer`` and ``SwinTransformer`` count it, for
        layer-wise learning-rate decay (mmpretrain's
        ``LearningRateDecayOptimWrapperConstructor``).

        With ``n`` blocks built there are ``n + 2`` depths: 0 holds the
        embeddings (:attr:`embedding_names`), 1 to ``n`` the blocks in the
        order they run (:meth:`block_depth` places the other parameters of
        a stage), and ``n + 1`` what follows the last block (final norms,
        output layers) and every parameter outside the backbone (names not
        starting with ``prefix``: necks and heads).

        Args:
            param_name (str): The parameter's name in the model.
            prefix (str): The backbone's name in the model followed by a
                dot, e.g. ``'backbone.'``. Defaults to ''.

        Returns:
            tuple[int, int]: The parameter's depth and the number of depths.

        Examples:
            >>> from mmtnt.models import TNT
            >>> model = TNT(arch='s')
            >>> model.get_layer_depth('backbone.cls_token', 'backbone.')
            (0, 14)
            >>> model.get_layer_depth('backbone.blocks.3.outer.norm1.weight',
            ...                       'backbone.')
            (4, 14)
            >>> model.get_layer_depth('head.fc.weight', 'backbone.')
            (13, 14)
        """
        num_layers = self.num_blocks + 2
        if not param_name.startswith(prefix):
            return num_layers - 1, num_layers
        name = param_name[len(prefix):]
        if name.split('.')[0] in self.embedding_names:
            return 0, num_layers
        depth = self.block_depth(name)
        return (num_layers - 1 if depth is None else depth), num_layers

    def block_depth(self, name):
        """The depth of a backbone parameter that is not an embedding.

        Args:
            name (str): The parameter's name in the backbone.

        Returns:
            int | None: 0 to ``num_blocks``; None for what follows the last
            block.
        """
        raise NotImplementedError

    def _check_frozen_stages(self, num_stages):
        if not -1 <= self.frozen_stages <= num_stages:
            raise ValueError(
                f'frozen_stages must be in [-1, {num_stages}] for '
                f'{type(self).__name__}, got {self.frozen_stages}.')

    def _check_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Called by ``load_state_dict`` before loading."""
        if self.foreign_keys is not None:
            foreign = re.compile(self.foreign_keys)
            for key in state_dict:
                if key.startswith(prefix) and foreign.match(
                        key[len(prefix):]):
                    raise ValueError(
                        f'This checkpoint is in a foreign '
                        f'{type(self).__name__} layout (keys such as '
                        f'{key!r}): convert it first with `python '
                        f'tools/model_converters/{self.converter} SRC DST`.')
        self.adapt_state_dict(state_dict, prefix)

    def adapt_state_dict(self, state_dict, prefix):
        """Change ``state_dict`` in place before it loads (e.g. resize
        position terms); the keys of this module start with ``prefix``."""

    def _freeze(self):
        if self.frozen_stages < 0:
            return
        for part in self.frozen_parts():
            if isinstance(part, nn.Parameter):
                part.requires_grad = False
                continue
            part.eval()
            for param in part.parameters():
                param.requires_grad = False

    def train(self, mode=True):
        super().train(mode)
        self._freeze()
        if mode and self.norm_eval:
            for module in self.modules():
                if isinstance(module, _BatchNorm):
                    module.eval()
        return self
