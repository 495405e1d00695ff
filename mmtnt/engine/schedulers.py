"""Learning-rate schedulers that mmengine's own cannot compose."""
import math

from mmengine.optim.scheduler import _ParamScheduler
from mmengine.optim.scheduler.param_scheduler import INF

from mmtnt.registry import PARAM_SCHEDULERS


def warmup_cosine_value(step, base, T_max, eta_min, warmup_steps,
                        warmup_start):
    """The value of :class:`WarmupCosineLR` at ``step`` (from its begin).

    Args:
        step (int): Steps since the scheduler's ``begin``.
        base (float): The value the cosine starts from (the optimizer's lr).
        T_max (int): Steps of the cosine, counted from step 0.
        eta_min (float): The value at and after step ``T_max``.
        warmup_steps (int): Steps of the linear warm-up, which replaces the
            first steps of the cosine instead of delaying it.
        warmup_start (float): The value at step 0 when there is a warm-up.

    Returns:
        float: The scheduled value.

    Examples:
        >>> round(warmup_cosine_value(150, 1e-3, 300, 1e-5, 20, 1e-6), 7)
        0.000505
        >>> warmup_cosine_value(0, 1e-3, 300, 1e-5, 20, 1e-6)
        1e-06
    """
    if step < warmup_steps:
        return warmup_start + step * (base - warmup_start) / warmup_steps
    if step >= T_max:
        return eta_min
    cosine = 1 + math.cos(math.pi * step / T_max)
    return eta_min + 0.5 * (base - eta_min) * cosine


@PARAM_SCHEDULERS.register_module()
class WarmupCosineLR(_ParamScheduler):
    """Cosine annealing over ``T_max`` steps from ``begin``, whose first
    ``warmup_steps`` are replaced by a linear warm-up, then ``eta_min``.

    The curve of timm's ``CosineLRScheduler`` without restarts, as the
    official TNT and PyramidTNT runs stepped it: the warm-up is laid over
    the cosine, which mmengine's ``LinearLR`` and ``CosineAnnealingLR``
    cannot compose. The lr is set from the closed form, so this scheduler
    is not chained with other lr schedulers.

    Args:
        optimizer (Optimizer or OptimWrapper): The (wrapped) optimizer; its
            lr is the peak of the cosine.
        T_max (int): Steps (epochs or iterations, as ``by_epoch``) of the
            cosine, counted from ``begin``.
        eta_min (float): The lr at and after step ``T_max``. Defaults to 0.
        warmup_steps (int): Steps of the linear warm-up from
            ``warmup_start``. Defaults to 0.
        warmup_start (float): The lr of the first step when there is a
            warm-up. Defaults to 0.
        begin (int): Step at which the schedule starts. Defaults to 0.
        end (int): Step at which the lr stops changing. Defaults to INF.
        last_step (int): The index of the last step, to resume without a
            state dict. Defaults to -1.
        by_epoch (bool): Whether the steps are epochs. Defaults to True.
        verbose (bool): Print the lr at each update. Defaults to False.

    Examples:
        >>> import torch
        >>> weight = torch.nn.Parameter(torch.zeros(1))
        >>> optimizer = torch.optim.AdamW([weight], lr=1e-3)
        >>> scheduler = WarmupCosineLR(optimizer, T_max=300, eta_min=1e-5,
        ...                            warmup_steps=20, warmup_start=1e-6)
        >>> optimizer.param_groups[0]['lr']
        1e-06
    """

    def __init__(self,
                 optimizer,
                 T_max,
                 eta_min=0.,
                 warmup_steps=0,
                 warmup_start=0.,
                 begin=0,
                 end=INF,
                 last_step=-1,
                 by_epoch=True,
                 verbose=False):
        self.T_max = T_max
        self.eta_min = eta_min
        self.warmup_steps = warmup_steps
        self.warmup_start = warmup_start
        super().__init__(
            optimizer,
            'lr',
            begin=begin,
            end=end,
            last_step=last_step,
            by_epoch=by_epoch,
            verbose=verbose)

    def _get_value(self):
        """The lr of each parameter group at ``self.last_step``."""
        return [
            warmup_cosine_value(self.last_step, base, self.T_max,
                                self.eta_min, self.warmup_steps,
                                self.warmup_start)
            for base in self.base_values
        ]
