"""Mixed-precision training on the CPU."""
import torch
from mmengine.optim import AmpOptimWrapper, OptimWrapper

from mmtnt.registry import OPTIM_WRAPPERS


@OPTIM_WRAPPERS.register_module()
class CPUAmpOptimWrapper(AmpOptimWrapper):
    """:class:`AmpOptimWrapper` for the CPU: bfloat16 autocast, the gradient
    scaler disabled (bfloat16 needs no loss scaling).

    Args:
        dtype (str | torch.dtype): Autocast data type; only bfloat16 is
            supported. Defaults to ``'bfloat16'``.
        **kwargs: Passed to :class:`OptimWrapper`.

    Examples:
        >>> import torch
        >>> from mmtnt.engine import CPUAmpOptimWrapper
        >>> model = torch.nn.Linear(4, 2)
        >>> wrapper = CPUAmpOptimWrapper(
        ...     optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
        >>> with wrapper.optim_context(model):
        ...     print(model(torch.rand(3, 4)).dtype)
        torch.bfloat16
    """

    def __init__(self, dtype='bfloat16', **kwargs):
        # AmpOptimWrapper.__init__ asserts an accelerator: skip it.
        OptimWrapper.__init__(self, **kwargs)
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype, None)
        if dtype != torch.bfloat16:
            raise ValueError('CPU autocast supports bfloat16 only, got '
                             f'dtype={dtype}.')
        self.cast_dtype = dtype
        self._scale_update_param = None
        self.loss_scaler = torch.amp.GradScaler('cpu', enabled=False)
