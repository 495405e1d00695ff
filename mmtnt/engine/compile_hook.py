"""Training with ``torch.compile`` (``tools/train.py --compile``)."""
import torch
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.optim import OptimWrapperDict

from mmtnt.registry import HOOKS


def optimizers(optim_wrapper):
    """The optimizers of a wrapper or of an :class:`OptimWrapperDict`."""
    if isinstance(optim_wrapper, OptimWrapperDict):
        return [wrapper.optimizer for wrapper in optim_wrapper.values()]
    return [optim_wrapper.optimizer]


def make_param_groups_plain(optimizer):
    """Make the parameter groups of ``optimizer`` plain dicts, in place."""
    optimizer.param_groups[:] = [
        group if type(group) is dict else dict(group)
        for group in optimizer.param_groups
    ]


def run_eagerly(module):
    """Keep ``torch.compile`` out of ``module.forward``, in place."""
    module.forward = torch.compiler.disable(module.forward)


@HOOKS.register_module()
class CompileHook(Hook):
    """Prepare the runner for a compiled ``train_step`` (``compile=True``).

    Before training it makes the optimizers' parameter groups plain dicts
    (TorchDynamo fails to trace ``step`` over ``ConfigDict`` groups) and runs
    the data preprocessor eagerly (guards on each image's strides would
    recompile it on every batch of mixed layouts).
    """
    priority = 'VERY_HIGH'

    def before_train(self, runner):
        for optimizer in optimizers(runner.optim_wrapper):
            make_param_groups_plain(optimizer)
        model = runner.model
        if is_model_wrapper(model):
            model = model.module
        run_eagerly(model.data_preprocessor)


def enable_compile(cfg):
    """Set ``cfg.compile`` to True unless it is a dict of ``torch.compile``
    arguments, in place."""
    if not isinstance(cfg.get('compile'), dict):
        cfg.compile = True


def add_compile_hook(cfg):
    """Add :class:`CompileHook` once to a config that compiles, in
    place."""
    if not cfg.get('compile'):
        return
    hook = dict(type=f'mmtnt.{CompileHook.__name__}')
    hooks = list(cfg.get('custom_hooks', []))
    if hook['type'] not in [h.get('type') for h in hooks]:
        cfg.custom_hooks = hooks + [hook]
