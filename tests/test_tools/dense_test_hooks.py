"""A hook the distributed tests of the dense demos put into training runs.

Like ``tool_test_hooks.RecordRankHook``, but it names the images by path
(mmdet's and mmseg's data samples carry no ``sample_idx``) and keeps the
parameters only: BatchNorm running statistics are updated by each rank on
its own batch after DDP broadcast them, so they may differ at the end.
"""
import math
import os.path as osp

import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from tool_test_hooks import bare_model


def parameters(runner):
    """A copy of the model's parameters, by name."""
    return {
        name: param.detach().clone()
        for name, param in bare_model(runner).named_parameters()
    }


@HOOKS.register_module()
class RecordRankParamsHook(Hook):
    """Save what this rank saw and its weights to ``rank{r}.pth``.

    The file, in the work dir, holds ``world_size``, ``wrapper`` (the type
    of ``runner.model``), ``images`` (the image files of every train batch,
    in order), ``losses``, and ``initial`` and ``final`` (the parameters
    before and after training).
    """
    priority = 'LOWEST'

    def before_train(self, runner):
        self.images = []
        self.losses = []
        self.initial = parameters(runner)

    def after_train_iter(self,
                         runner,
                         batch_idx,
                         data_batch=None,
                         outputs=None):
        self.images += [
            osp.basename(s.img_path) for s in data_batch['data_samples']
        ]
        self.losses.append(float(outputs['loss']))
        assert math.isfinite(self.losses[-1])

    def after_train(self, runner):
        record = dict(
            world_size=runner.world_size,
            wrapper=type(runner.model).__name__,
            images=self.images,
            losses=self.losses,
            initial=self.initial,
            final=parameters(runner))
        torch.save(record, osp.join(runner.work_dir, f'rank{runner.rank}.pth'))
