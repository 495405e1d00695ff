"""The layers a class activation map is made from: named by Python
expressions relative to the model (``'backbone.stages[-1].norm'``), with a
default for every backbone."""
import re

import torch.nn as nn
from mmengine.utils.dl_utils import is_norm


def layer_expression(name):
    """A ``named_modules`` name written as a Python expression.

    Examples:
        >>> layer_expression('backbone.stages.3.blocks.0.norm1')
        'backbone.stages[3].blocks[0].norm1'
    """
    out = ''
    for part in name.split('.'):
        out += f'[{part}]' if part.isdigit() else ('.' if out else '') + part
    return out


def _children(module, expression):
    """The expressions of the children of ``module``."""
    names = [
        layer_expression(f'{expression}.{n}' if expression else n)
        for n, _ in module.named_children()
    ]
    return ', '.join(names) or '(none: it is a leaf module)'


# An attribute (after a dot, or first) or an integer index in brackets.
_STEP = re.compile(r'(?:^|\.)([A-Za-z_]\w*)|\[\s*(-?\d+)\s*\]')


def _steps(expression):
    """The attribute names and integer indices of ``expression``, or
    None."""
    expression = expression.strip()
    steps, end = [], 0
    for match in _STEP.finditer(expression):
        if match.start() != end:
            return None
        name, index = match.groups()
        steps.append(name if name is not None else int(index))
        end = match.end()
    if end != len(expression) or not steps or isinstance(steps[0], int):
        return None
    return steps


def resolve_layer(model, expression):
    """Find the submodule of ``model`` that ``expression`` names.

    Args:
        model (nn.Module): The model.
        expression (str): Attributes and integer indices from the model,
            e.g. ``'backbone.stages[-1].norm'``, or a ``named_modules`` name.

    Raises:
        ValueError: Listing the submodules where the lookup stopped.

    Examples:
        >>> from mmengine.config import Config
        >>> from mmtnt.visualization import build_classifier
        >>> cfg = Config.fromfile(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py')
        >>> model = build_classifier(cfg)
        >>> layer = resolve_layer(model, 'backbone.blocks[-1].outer.norm1')
        >>> type(layer).__name__, layer is resolve_layer(
        ...     model, 'backbone.blocks.3.outer.norm1')
        ('LayerNorm', True)
    """
    modules = dict(model.named_modules())
    if expression in modules and expression:
        return modules[expression]
    steps = _steps(expression)
    if steps is None:
        raise ValueError(
            f'Cannot read the target layer {expression!r}: write attributes '
            f'and integer indices from the model, e.g. '
            f'"backbone.stages[-1].norm". The model has: '
            f'{_children(model, "")}.')
    layer, path = model, ''
    for step in steps:
        if isinstance(step, int):
            if not isinstance(layer, (nn.ModuleList, nn.Sequential)):
                raise ValueError(
                    f'Target layer {expression!r}: {path} is a '
                    f'{type(layer).__name__}, which cannot be indexed; its '
                    f'submodules are {_children(layer, path)}.')
            if not -len(layer) <= step < len(layer):
                raise ValueError(
                    f'Target layer {expression!r}: {path} has '
                    f'{len(layer)} items, there is no [{step}].')
            layer, path = layer[step], f'{path}[{step}]'
            continue
        child = layer._modules.get(step) if isinstance(layer,
                                                       nn.Module) else None
        if child is None:
            where = path or 'the model'
            raise ValueError(
                f'Target layer {expression!r}: {where} has no submodule '
                f'{step!r}; its submodules are '
                f'{_children(layer, path)}.')
        layer, path = child, f'{path}.{step}' if path else step
    return layer


def layer_name(model, layer):
    """The expression naming ``layer`` in ``model`` (or its repr)."""
    for name, module in model.named_modules():
        if module is layer:
            return layer_expression(name)
    return repr(layer)


def default_target_layers(model):
    """The layers whose CAM is drawn unless ``--target-layers`` is given:
    the backbone's ``token_layer()`` for mmtnt's, else its last norm.

    Examples:
        >>> from mmengine.config import Config
        >>> from mmtnt.visualization import build_classifier
        >>> cfg = Config.fromfile(
        ...     'configs/demo/tnt-demo_1xb128_fashion-mnist.py')
        >>> model = build_classifier(cfg)
        >>> default_target_layers(model)
        ['backbone.blocks[3].outer.norm1']
    """
    backbone = model.backbone
    token_layer = getattr(backbone, 'token_layer', None)
    if token_layer is not None:
        return [layer_expression(f'backbone.{token_layer()}')]
    norms = [
        name for name, module in backbone.named_modules(prefix='backbone')
        if is_norm(module)
    ]
    if not norms:
        raise ValueError(
            f'No default target layer for a {type(backbone).__name__} '
            'backbone: give --target-layers.')
    return [layer_expression(norms[-1])]
