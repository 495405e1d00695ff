import torch.nn as nn
from mmengine.model import BaseModule
from torch.nn.modules.batchnorm import _BatchNorm


class BaseBackbone(BaseModule):
    """What mmtnt's backbones share: frozen stages and ``norm_eval``.

    A subclass lists what ``frozen_stages`` freezes in :meth:`frozen_parts`;
    frozen modules stay in eval mode and their parameters get no gradient,
    also after ``model.train()``.

    Args:
        frozen_stages (int): Stages (blocks for isotropic models) to freeze;
            -1 freezes nothing, 0 only the stem. Defaults to -1.
        norm_eval (bool): Keep every BatchNorm layer in eval mode while
            training (frozen running statistics). Defaults to False.
        init_cfg (dict | list[dict], optional): Initialization config.
    """

    def __init__(self, frozen_stages=-1, norm_eval=False, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval

    def frozen_parts(self):
        """Modules and parameters that ``frozen_stages`` freezes.

        Returns:
            list[nn.Module | nn.Parameter]
        """
        raise NotImplementedError

    def _check_frozen_stages(self, num_stages):
        if not -1 <= self.frozen_stages <= num_stages:
            raise ValueError(
                f'frozen_stages must be in [-1, {num_stages}] for '
                f'{type(self).__name__}, got {self.frozen_stages}.')

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
