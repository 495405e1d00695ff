"""Training with ``torch.compile``: the config keys and the hook that
mmengine's runner needs for it (``tools/train.py --compile``)."""
import torch
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.optim import OptimWrapperDict

from mmtnt.registry import HOOKS


def optimizers(optim_wrapper):
    """The optimizers of an optimizer wrapper, or of every wrapper of an
    :class:`OptimWrapperDict`."""
    if isinstance(optim_wrapper, OptimWrapperDict):
        return [wrapper.optimizer for wrapper in optim_wrapper.values()]
    return [optim_wrapper.optimizer]


def make_param_groups_plain(optimizer):
    """Replace the parameter groups of ``optimizer`` by plain dicts.

    The groups keep their keys and values (the same parameter lists); the
    optimizer state, keyed by parameter, is untouched.

    Args:
        optimizer (torch.optim.Optimizer): Changed in place.

    Examples:
        >>> import torch
        >>> from mmengine.config import ConfigDict
        >>> weight = torch.nn.Parameter(torch.zeros(2))
        >>> optimizer = torch.optim.SGD([ConfigDict(params=[weight])], lr=1)
        >>> make_param_groups_plain(optimizer)
        >>> type(optimizer.param_groups[0]).__name__
        'dict'
    """
    optimizer.param_groups[:] = [
        group if type(group) is dict else dict(group)
        for group in optimizer.param_groups
    ]


def run_eagerly(module):
    """Keep ``torch.compile`` out of ``module.forward`` (it runs eagerly
    inside a compiled caller too).

    Args:
        module (nn.Module): Changed in place.
    """
    module.forward = torch.compiler.disable(module.forward)


@HOOKS.register_module()
class CompileHook(Hook):
    """Prepare the runner for a compiled ``train_step`` (``compile=True``).

    ``tools/train.py`` adds this hook whenever the config compiles. Before
    training it

    - makes the optimizers' parameter groups plain dicts: with
      ``paramwise_cfg``, mmengine's ``DefaultOptimWrapperConstructor`` makes
      them ``ConfigDict``, on which TorchDynamo fails to trace the
      optimizer's ``step``;
    - runs the data preprocessor eagerly: it takes the list of the batch's
      images, and TorchDynamo guards on the strides of every one of them, so
      batches whose images differ in memory layout (e.g. grey images, some
      flipped) recompile it on every iteration until the recompile limit.
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
    """Have the runner compile the model's ``train_step``.

    mmengine's runner reads ``cfg.compile``: True for the default arguments
    of ``torch.compile``, or a dict of them, which is kept as it is.

    Args:
        cfg (Config): The full config; changed in place.
    """
    if not isinstance(cfg.get('compile'), dict):
        cfg.compile = True


def add_compile_hook(cfg):
    """Add :class:`CompileHook` to the custom hooks of a config that
    compiles (``cfg.compile`` is True or a dict), once.

    Args:
        cfg (Config): The full config; changed in place.
    """
    if not cfg.get('compile'):
        return
    hook = dict(type=f'mmtnt.{CompileHook.__name__}')
    hooks = list(cfg.get('custom_hooks', []))
    if hook['type'] not in [h.get('type') for h in hooks]:
        cfg.custom_hooks = hooks + [hook]
