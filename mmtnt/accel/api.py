import torch
import torch.nn as nn
from mmengine.logging import print_log

from ..models.backbones.base_backbone import BaseBackbone
from ..models.layers import (LocallyGroupedAttention, Mlp, MultiheadAttention,
                             SpatialReductionAttention, TransformerBlock)
from .allocator import keep_freed_memory
from .attention import (CpuLocallyGroupedAttention, CpuMultiheadAttention,
                        CpuSpatialReductionAttention)
from .linear import OneDnnLinear
from .modules import CpuMlp, CpuTransformerBlock

#: Each plain class and its CPU version (same parameters and state dict).
CPU_VERSIONS = {
    nn.Linear: OneDnnLinear,
    Mlp: CpuMlp,
    MultiheadAttention: CpuMultiheadAttention,
    SpatialReductionAttention: CpuSpatialReductionAttention,
    LocallyGroupedAttention: CpuLocallyGroupedAttention,
    TransformerBlock: CpuTransformerBlock,
}


def model_device(model):
    """The device of the model's first parameter or buffer; None for a
    model without any."""
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return None


def accelerate_for_cpu(model):
    """Make a model faster on the CPU, in place, computing the same
    function.

    Every module of :data:`CPU_VERSIONS` (matched by exact type) becomes
    its CPU version by a swap of its class, so parameters, buffers, hooks,
    state dict keys and optimizers stay as they are; the convolution
    weights of mmtnt's backbones are stored channels-last, the layout of
    the token maps they see. A checkpoint of either form loads into the
    other. The CPU versions run float32 products on oneDNN, keep less for
    the backward pass of the MLPs, fuse inference post-ops and route
    attention to explicit products where PyTorch's fused kernel is slower
    on the CPU; under a tracer or compiler they compute the plain layers'
    operations. A model that is not on the CPU is returned unchanged.

    Args:
        model (nn.Module): The model, on the CPU.

    Returns:
        nn.Module: ``model`` itself.

    Examples:
        >>> from mmtnt.models import SVT
        >>> model = accelerate_for_cpu(SVT(arch='s'))
        >>> type(model.stages[0].blocks[0].mlp.fc1).__name__
        'OneDnnLinear'
    """
    device = model_device(model)
    if device is not None and device.type != 'cpu':
        print_log(
            f'accelerate_for_cpu: the model is on {device}, not the CPU; '
            'it is left unchanged.',
            logger='current')
        return model
    for module in model.modules():
        cpu_version = CPU_VERSIONS.get(type(module))
        if cpu_version is not None:
            module.__class__ = cpu_version
        if isinstance(module, BaseBackbone):
            # Only mmtnt's backbones: they return contiguous maps, while
            # other modules may hand channels-last maps to operators that
            # assume NCHW (mmcv's RoIAlign on the CPU).
            for conv in module.modules():
                if isinstance(conv, nn.Conv2d):
                    conv.to(memory_format=torch.channels_last)
    return model


def is_accelerated(model):
    """Whether any module of ``model`` is a CPU version of
    :data:`CPU_VERSIONS`."""
    cpu_versions = set(CPU_VERSIONS.values())
    return any(type(module) in cpu_versions for module in model.modules())


def accelerate_runner(runner):
    """Apply :func:`accelerate_for_cpu` to a runner's model when it runs on
    the CPU, and make glibc keep freed memory for reuse
    (:func:`keep_freed_memory`).

    This is where the tools switch the accelerator: nothing changes when
    the config says ``cpu_accel = False`` (``--no-cpu-accel``), when it
    compiles the model (``compile``: the compiler sees the plain model), or
    when the model is on another device.

    Args:
        runner (mmengine.runner.Runner): A built runner.

    Returns:
        bool: Whether the accelerator was applied.
    """
    cfg = runner.cfg
    if not cfg.get('cpu_accel', True):
        print_log('CPU accelerator: off (cpu_accel=False).', logger='current')
        return False
    if cfg.get('compile'):
        print_log('CPU accelerator: off, torch.compile compiles the plain '
                  'model.', logger='current')
        return False
    device = model_device(runner.model)
    if device is None or device.type != 'cpu':
        return False
    accelerate_for_cpu(runner.model)
    keep_freed_memory()
    print_log('CPU accelerator: on (mmtnt.accelerate_for_cpu; turn it off '
              'with --no-cpu-accel or cpu_accel=False).', logger='current')
    return True
