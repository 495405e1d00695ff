import torch
import torch.nn as nn
from mmengine.logging import print_log

from ..models.backbones.base_backbone import BaseBackbone
from ..models.layers import (LocallyGroupedAttention, Mlp, MultiheadAttention,
                             SpatialReductionAttention, TransformerBlock)
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

    Every module of :data:`CPU_VERSIONS` (``nn.Linear`` and mmtnt's plain
    layers, matched by exact type) becomes its CPU version: its class is
    swapped, so parameters, buffers, hooks and state dict keys stay as they
    are, and an optimizer built before or after sees the same parameters.
    The convolution weights of mmtnt's backbones are stored channels-last,
    the layout of the token maps they see. A checkpoint saved from either
    form loads into the other.

    The CPU versions run float32 products on oneDNN, keep less for the
    backward pass of the MLPs, fuse inference post-ops and route attention
    to explicit products where PyTorch's fused kernel is slower on the CPU;
    under a tracer or compiler they step aside and compute the plain
    layers' operations.

    A model that is not on the CPU is returned unchanged.

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
