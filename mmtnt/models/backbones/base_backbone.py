import re

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmengine.model import BaseModule
from torch.nn.modules.batchnorm import _BatchNorm

from ..layers import tokens_to_map


class BaseBackbone(BaseModule):
    """What mmtnt's backbones share: output types, frozen stages,
    ``norm_eval``, ``with_cp``, the smallest input and the checkpoint check.

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

    @staticmethod
    def smallest_side(fits):
        """The smallest positive side ``s`` for which ``fits(s)`` holds
        (an ``s`` x ``s`` input is large enough)."""
        side = 1
        while not fits(side):
            side += 1
        return side

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
