"""The base of mmtnt's backbones."""
import functools
import itertools
import re
from typing import NamedTuple, Tuple

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmengine.model import BaseModule
from torch.nn.modules.batchnorm import _BatchNorm

from ..layers import drop_path_rates, tokens_to_map
from ..utils import (normalize_out_indices, resize_pos_embed, resolve_arch,
                     square_grid)


class TokenGrid(NamedTuple):
    """Where the tokens of a stage lie: grid ``hw`` (row-major, ``ceil(H /
    stride)`` by ``ceil(W / stride)``), ``stride``, ``channels`` and
    ``min_side``, the smallest grid side the stage takes (``sr_ratio``)."""
    hw: Tuple[int, int]
    stride: int
    channels: int
    min_side: int = 1


def stage_drop_path_rates(drop_path_rate, depths):
    """Stochastic depth rising linearly over all blocks, one list a stage."""
    rates = drop_path_rates(drop_path_rate, sum(depths))
    starts = itertools.accumulate(depths, initial=0)
    return [rates[start:start + depth] for start, depth in zip(starts, depths)]


class BaseBackbone(BaseModule):
    """What mmtnt's backbones share: arch lookup, outputs, frozen stages,
    ``norm_eval``, ``with_cp``, the checkpoint check, and the geometry
    (:meth:`stage_token_grids`) that every tool reads. Stages after the last
    of ``out_indices`` are not built (they would get no gradients).

    Args:
        arch (str | dict): A name of :attr:`arch_zoo` (any case) or a dict
            with the keys :attr:`essential_keys`.
        out_indices (int | Sequence[int]): Stages whose output is returned;
            negative indices count from the end.
        out_type (str): The form of each output, one of :attr:`out_types`.
        frozen_stages (int): Stages to freeze; -1 freezes nothing, 0 only
            the embeddings. Defaults to -1.
        norm_eval (bool): Keep BatchNorms in eval mode. Defaults to False.
        with_cp (bool): Recompute each block in the backward pass (saves
            memory). Defaults to False.
        init_cfg (dict | list[dict], optional): Initialization config.
    """
    #: Settings by arch name, aliases included.
    arch_zoo = {}
    #: The keys of a custom arch.
    essential_keys = set()
    #: The ``out_type`` values the backbone takes.
    out_types = ('featmap', 'avg_featmap')
    #: Keys (after the prefix) of the layouts the converter reads.
    foreign_keys = None
    #: The script that converts those layouts.
    converter = None
    #: Tokens before the grid's in a stage's token sequence.
    num_extra_tokens = 0
    #: Top-level parts before the first block (depth 0, frozen_stages=0).
    embedding_names = ()

    def __init__(self, arch, out_indices, out_type, frozen_stages=-1,
                 norm_eval=False, with_cp=False, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        name = type(self).__name__
        if out_type not in self.out_types:
            raise ValueError(f'Unknown {name} out_type {out_type!r}: choose '
                             f'one of {self.out_types}.')
        self.arch_settings = resolve_arch(arch, self.arch_zoo,
                                          self.essential_keys, name)
        self.num_stages = self.count_stages(self.arch_settings)
        self.out_indices = normalize_out_indices(out_indices,
                                                 self.num_stages, name)
        if not -1 <= frozen_stages <= self.num_stages:
            raise ValueError(
                f'frozen_stages must be in [-1, {self.num_stages}] for '
                f'{name}, got {frozen_stages}.')
        self.out_type = out_type
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval
        self.with_cp = with_cp
        self._register_load_state_dict_pre_hook(self._check_state_dict)

    def count_stages(self, settings):
        """The number of stages of an arch's ``settings``."""
        return len(settings['depths'])

    @property
    def num_built_stages(self):
        """Stages built: up to the last of ``out_indices``."""
        return self.out_indices[-1] + 1

    def stage_modules(self):
        """The built stages (list[nn.Module]), in order."""
        return list(self.stages)

    def build_final_norm(self, final_norm, norm_cfg, dims):
        """The final norm, or ``nn.Identity`` if off or not built."""
        if final_norm and self.num_built_stages == self.num_stages:
            return build_norm_layer(norm_cfg, dims)[1]
        return nn.Identity()

    def frozen_parts(self):
        """Modules and parameters that ``frozen_stages`` freezes."""
        parts = [getattr(self, name) for name in self.embedding_names]
        parts += self.stage_modules()[:self.frozen_stages]
        if self.frozen_stages == self.num_stages:
            parts.append(self.norm)
        return parts

    def run_block(self, block, *args):
        """``block(*args)``, checkpointed with ``with_cp`` while training."""
        if self.with_cp and self.training and torch.is_grad_enabled():
            return cp.checkpoint(block, *args, use_reentrant=False)
        return block(*args)

    def format_tokens(self, tokens, hw_shape):
        """Tokens (B, H*W, C) as a map (``'featmap'``) or their mean."""
        if self.out_type == 'avg_featmap':
            return tokens.mean(dim=1)
        return tokens_to_map(tokens, hw_shape).contiguous()

    def stage_token_grids(self, height, width):
        """The :class:`TokenGrid` of every built stage for an input size."""
        raise NotImplementedError

    def token_grids(self, height, width):
        """The :class:`TokenGrid` of each output for an input size.

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
        """The smallest input side at which every stage grid is at least its
        ``min_side``."""
        side = 1
        while not all(
                min(grid.hw) >= grid.min_side
                for grid in self.stage_token_grids(side, side)):
            side += 1
        return side

    def check_input(self, x):
        """The stage grids of images ``x``; ValueError if too small."""
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
        """The module whose output tokens make the last output (the default
        CAM target), e.g. ``'stages.3.norm'``."""
        raise NotImplementedError

    @property
    def num_blocks(self):
        """The number of blocks built (all stages together)."""
        return sum(len(stage.blocks) for stage in self.stages)

    def get_layer_depth(self, param_name, prefix=''):
        """The layer-wise depth of a parameter for mmpretrain's
        ``LearningRateDecayOptimWrapperConstructor``: 0 for the embeddings,
        1 to ``n`` for the blocks, ``n + 1`` for the rest.

        Args:
            param_name (str): The parameter's name in the model.
            prefix (str): The backbone's prefix, e.g. ``'backbone.'``.

        Returns:
            tuple[int, int]: The parameter's depth and the number of depths.

        Examples:
            >>> from mmtnt.models import TNT
            >>> model = TNT(arch='s')
            >>> model.get_layer_depth('backbone.blocks.3.outer.norm1.weight',
            ...                       'backbone.')
            (4, 14)
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
        """The depth of a non-embedding parameter; None after the blocks."""
        raise NotImplementedError

    def stage_depth(self, name, part_offset):
        """:meth:`block_depth` in ``stages``: block ``j`` of stage ``i`` at
        ``d_i + j + 1`` (``d_i``: blocks before the stage), another part at
        ``d_i + part_offset(i, part)`` (None: after the blocks)."""
        parts = name.split('.')
        if parts[0] != 'stages':
            return None
        i = int(parts[1])
        before = sum(len(stage.blocks) for stage in self.stages[:i])
        if parts[2] == 'blocks':
            return before + int(parts[3]) + 1
        offset = part_offset(i, parts[2])
        return None if offset is None else before + offset

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
        """Change ``state_dict`` in place before it loads."""

    def resize_loaded_pos_embed(self, state_dict, key, grid):
        """Resize a checkpoint's square position embedding to ``grid``."""
        pos = state_dict.get(key)
        extra = self.num_extra_tokens
        if pos is None or pos.shape[1] == extra + grid[0] * grid[1]:
            return
        src = square_grid(pos.shape[1] - extra,
                          'a sentence position embedding')
        state_dict[key] = resize_pos_embed(pos, src, grid, extra)

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
