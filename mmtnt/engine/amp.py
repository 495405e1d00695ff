"""Mixed precision for ``tools/train.py --amp``: autocast dtype and wrapper."""
import torch
from mmengine.optim import AmpOptimWrapper, OptimWrapper

from mmtnt.registry import OPTIM_WRAPPERS

#: The autocast dtypes that ``--amp-dtype`` takes.
AMP_DTYPES = ('bfloat16', 'float16')


def default_amp_dtype(device_type):
    """The autocast dtype where neither the user nor the config picks one.

    bfloat16 (no loss scaling needed) on the CPU and on GPUs that compute in
    it natively; float16 on older GPUs, which only emulate bfloat16.

    Args:
        device_type (str): ``'cuda'`` or ``'cpu'``.

    Examples:
        >>> default_amp_dtype('cpu')
        'bfloat16'
    """
    if device_type == 'cuda' and not torch.cuda.is_bf16_supported(
            including_emulation=False):
        return 'float16'
    return 'bfloat16'


def set_cuda_loss_scale(wrapper):
    """Set the loss scaling of an ``AmpOptimWrapper`` config for its dtype.

    float16 keeps the config's ``loss_scale``, else takes dynamic scaling.
    Other dtypes get a disabled ``GradScaler``, which mmengine would
    otherwise build to check every step's gradients for nothing.

    Args:
        wrapper (ConfigDict): ``cfg.optim_wrapper`` with its ``dtype`` set;
            changed in place.
    """
    if wrapper.dtype == 'float16':
        wrapper.setdefault('loss_scale', 'dynamic')
    else:
        wrapper.loss_scale = dict(enabled=False)


@OPTIM_WRAPPERS.register_module()
class CPUAmpOptimWrapper(AmpOptimWrapper):
    """:class:`AmpOptimWrapper` for the CPU: bfloat16 autocast, the gradient
    scaler disabled (bfloat16 needs no loss scaling).

    Args:
        dtype (str | torch.dtype): Autocast data type; only bfloat16 is
            supported. Defaults to ``'bfloat16'``.
        **kwargs: Passed to :class:`OptimWrapper`.

    Examples:
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


def enable_amp(cfg, dtype=None, device_type=None):
    """Switch ``cfg.optim_wrapper`` to mixed precision (``--amp``).

    The dtype is ``dtype``, else the wrapper's, else
    :func:`default_amp_dtype`. CUDA gets mmengine's ``AmpOptimWrapper``, the
    CPU :class:`CPUAmpOptimWrapper` (bfloat16 only).

    Args:
        cfg (Config): The full config; changed in place.
        dtype (str, optional): ``'bfloat16'`` or ``'float16'``
            (``--amp-dtype``). Defaults to None.
        device_type (str, optional): ``'cuda'`` or ``'cpu'``. Defaults to
            CUDA where a GPU is available.

    Raises:
        ValueError: If the dtype is not bfloat16 on the CPU.

    Examples:
        >>> from mmengine.config import Config
        >>> cfg = Config(dict(optim_wrapper=dict(optimizer=dict(
        ...     type='AdamW', lr=1e-4))))
        >>> enable_amp(cfg, device_type='cpu')
        >>> cfg.optim_wrapper.type, cfg.optim_wrapper.dtype
        ('mmtnt.CPUAmpOptimWrapper', 'bfloat16')
    """
    if device_type is None:
        device_type = 'cuda' if torch.cuda.is_available() else 'cpu'
    wrapper = cfg.optim_wrapper
    wrapper.dtype = (dtype or wrapper.get('dtype')
                     or default_amp_dtype(device_type))
    if device_type == 'cuda':
        wrapper.type = 'AmpOptimWrapper'
        set_cuda_loss_scale(wrapper)
        return
    if wrapper.dtype != 'bfloat16':
        raise ValueError(
            'Mixed precision on the CPU takes bfloat16 only, got '
            f'{wrapper.dtype!r} (from --amp-dtype or optim_wrapper.dtype '
            'of the config): float16 needs a CUDA GPU; on the CPU use '
            'bfloat16 (--amp-dtype bfloat16).')
    wrapper.type = f'mmtnt.{CPUAmpOptimWrapper.__name__}'
    wrapper.pop('loss_scale', None)
