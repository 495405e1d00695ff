"""Hooks the tool tests put into training runs (through ``custom_imports``).

They register into mmengine's root ``HOOKS``, which every default scope
falls back to; the tests add this folder to ``PYTHONPATH``.
"""
import math
import os
import os.path as osp
import signal

import torch
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS


def bare_model(runner):
    """Return the runner's model without its DDP wrapper."""
    model = runner.model
    return model.module if is_model_wrapper(model) else model


@HOOKS.register_module()
class KillAfterIterHook(Hook):
    """SIGKILL the process once ``iteration`` iterations are done.

    Nothing is cleaned up or saved, as when a job is pre-empted.

    Args:
        iteration (int): Train iterations to finish before dying.
    """
    priority = 'LOWEST'

    def __init__(self, iteration):
        self.iteration = iteration

    def after_train_iter(self,
                         runner,
                         batch_idx,
                         data_batch=None,
                         outputs=None):
        if runner.iter + 1 >= self.iteration:
            os.kill(os.getpid(), signal.SIGKILL)


@HOOKS.register_module()
class RecordRankHook(Hook):
    """Save what this rank saw and its final weights to ``rank{r}.pth``.

    The file, in the work dir, holds ``world_size``, ``wrapper`` (the type of
    ``runner.model``), ``device_ids`` (of a DDP wrapper), ``samples`` (dataset
    indices of every train batch, in order), ``losses`` and ``state_dict``.
    """

    def before_train(self, runner):
        self.samples = []
        self.losses = []

    def after_train_iter(self,
                         runner,
                         batch_idx,
                         data_batch=None,
                         outputs=None):
        self.samples += [s.sample_idx for s in data_batch['data_samples']]
        self.losses.append(float(outputs['loss']))
        assert math.isfinite(self.losses[-1])

    def after_train(self, runner):
        record = dict(
            world_size=runner.world_size,
            wrapper=type(runner.model).__name__,
            device_ids=getattr(runner.model, 'device_ids', None),
            samples=self.samples,
            losses=self.losses,
            state_dict=bare_model(runner).state_dict())
        torch.save(record, osp.join(runner.work_dir, f'rank{runner.rank}.pth'))


@HOOKS.register_module()
class RecordDtypeHook(Hook):
    """Save the dtypes that the model's linear layers output in train mode.

    The file is ``linear_dtypes.txt`` in the work dir, one dtype a line.
    """

    def before_train(self, runner):
        self.dtypes = set()
        for module in bare_model(runner).modules():
            if isinstance(module, torch.nn.Linear):
                module.register_forward_hook(self.record)

    def record(self, module, inputs, output):
        if module.training:
            self.dtypes.add(str(output.dtype))

    def after_train(self, runner):
        with open(osp.join(runner.work_dir, 'linear_dtypes.txt'), 'w') as f:
            f.write('\n'.join(sorted(self.dtypes)))
