"""Mixed precision as users choose it: the autocast dtype and the optimizer
wrapper that ``tools/train.py --amp`` and the benchmarks set up."""
import torch

from .optim_wrapper import CPUAmpOptimWrapper

#: The autocast dtypes that ``--amp-dtype`` takes.
AMP_DTYPES = ('bfloat16', 'float16')


def default_amp_dtype(device_type):
    """The autocast dtype of mixed precision where neither the user nor the
    config chooses one.

    bfloat16 has the exponent range of float32 and needs no loss scaling:
    it is taken on the CPU (whose autocast supports nothing else) and on
    CUDA GPUs that compute in it natively. Older GPUs only emulate it,
    slowly, so they take float16.

    Args:
        device_type (str): ``'cuda'`` or ``'cpu'``.

    Returns:
        str: ``'bfloat16'`` or ``'float16'``.

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

    float16 keeps the ``loss_scale`` of the config, else takes dynamic loss
    scaling. Other dtypes need none, but mmengine's ``AmpOptimWrapper``
    always builds a ``GradScaler``, which would check the gradients for inf
    and NaN at each step to no purpose; a dict ``loss_scale`` is passed to
    ``GradScaler``, and ``enabled=False`` makes it a pass-through, as in
    :class:`CPUAmpOptimWrapper`.

    Args:
        wrapper (ConfigDict): ``cfg.optim_wrapper`` with its ``dtype`` set;
            changed in place.
    """
    if wrapper.dtype == 'float16':
        wrapper.setdefault('loss_scale', 'dynamic')
    else:
        wrapper.loss_scale = dict(enabled=False)


def enable_amp(cfg, dtype=None, device_type=None):
    """Switch ``cfg.optim_wrapper`` to automatic mixed precision, as
    ``tools/train.py --amp`` does.

    The autocast dtype is ``dtype``, else the ``dtype`` of
    ``cfg.optim_wrapper``, else :func:`default_amp_dtype`. On CUDA the
    wrapper is mmengine's ``AmpOptimWrapper`` (see
    :func:`set_cuda_loss_scale`); on the CPU, where ``AmpOptimWrapper``
    does not run, :class:`CPUAmpOptimWrapper`, bfloat16 only.

    Args:
        cfg (Config): The full config; changed in place.
        dtype (str, optional): ``'bfloat16'`` or ``'float16'``, over the
            choice of the config and of the device (``--amp-dtype``).
            Defaults to None.
        device_type (str, optional): ``'cuda'`` or ``'cpu'``, where it
            trains. Defaults to CUDA where a GPU is available.

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
