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
from .modules import CpuConv2d, CpuMlp, CpuTransformerBlock

#: Each plain class and its CPU version (same parameters and state dict).
CPU_VERSIONS = {
    nn.Linear: OneDnnLinear,
    Mlp: CpuMlp,
    MultiheadAttention: CpuMultiheadAttention,
    SpatialReductionAttention: CpuSpatialReductionAttention,
    LocallyGroupedAttention: CpuLocallyGroupedAttention,
    TransformerBlock: CpuTransformerBlock,
}
#: The same inside mmtnt's backbones only: other modules may hand
#: channels-last maps to operators assuming NCHW (mmcv's CPU RoIAlign).
BACKBONE_CPU_VERSIONS = {nn.Conv2d: CpuConv2d}


def model_device(model):
    """The device of the model's first parameter or buffer, or None."""
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return None


def accelerate_for_cpu(model):
    """Make a model faster on the CPU, in place, computing the same
    function.

    Each module of :data:`CPU_VERSIONS` (exact type), and inside mmtnt's
    backbones of :data:`BACKBONE_CPU_VERSIONS`, gets its CPU version's
    class, so parameters, hooks, state dict keys and optimizers stay. A
    model that is not on the CPU is returned unchanged.

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
    backbones = [m for m in model.modules() if isinstance(m, BaseBackbone)]
    swap_classes(model, CPU_VERSIONS)
    for backbone in backbones:
        swap_classes(backbone, BACKBONE_CPU_VERSIONS)
        for conv in backbone.modules():
            if isinstance(conv, CpuConv2d):
                conv.to(memory_format=torch.channels_last)
    return model


def swap_classes(model, cpu_versions):
    """Give each module of ``model`` whose exact type is a key of
    ``cpu_versions`` the class it maps to, in place."""
    for module in model.modules():
        cpu_version = cpu_versions.get(type(module))
        if cpu_version is not None:
            module.__class__ = cpu_version


def is_accelerated(model):
    """Whether any module of ``model`` is one of :data:`CPU_VERSIONS` or
    :data:`BACKBONE_CPU_VERSIONS`."""
    cpu_versions = {*CPU_VERSIONS.values(), *BACKBONE_CPU_VERSIONS.values()}
    return any(type(module) in cpu_versions for module in model.modules())


def accelerate_runner(runner):
    """Apply :func:`accelerate_for_cpu` and :func:`keep_freed_memory` to a
    runner whose model is on the CPU, unless the config says
    ``cpu_accel = False`` or ``compile``.

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
