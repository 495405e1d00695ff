"""Helpers shared by the checkpoint converters."""
import pickle
import re

import torch

from mmtnt.utils import check_checkpoint_file


def load_checkpoint_file(path, allow_pickle=False):
    """Load a checkpoint file on the CPU, with ``weights_only=True`` unless
    ``allow_pickle`` is set.

    Args:
        path (str): The checkpoint file.
        allow_pickle (bool): Load pickled objects other than tensors (only
            for trusted files). Defaults to False.

    Returns:
        dict: The loaded object.
    """
    check_checkpoint_file(path)
    try:
        return torch.load(path, map_location='cpu',
                          weights_only=not allow_pickle)
    except pickle.UnpicklingError as error:  # weights_only refused a global
        if allow_pickle:
            raise
        raise RuntimeError(
            f'{path} holds objects other than tensors ({error}). If you '
            'trust the file, convert it again with --allow-pickle.'
        ) from error


def extract_state_dict(checkpoint):
    """Find the weights in a loaded checkpoint.

    Accepts a bare state dict or one under ``state_dict``, ``model`` or
    ``module``, and strips DataParallel's ``module.`` prefix.

    Args:
        checkpoint (dict): A loaded checkpoint.

    Returns:
        dict[str, Tensor]: The weights.
    """
    if not isinstance(checkpoint, dict):
        raise TypeError('A checkpoint must be a dict of tensors or hold one '
                        f'under "state_dict"/"model", got '
                        f'{type(checkpoint).__name__}.')
    for key in ('state_dict', 'model', 'module'):
        if isinstance(checkpoint.get(key), dict):
            checkpoint = checkpoint[key]
            break
    return {
        re.sub(r'^module\.', '', key): value
        for key, value in checkpoint.items() if torch.is_tensor(value)
    }


def split_classifier(state_dict):
    """Split weights into backbone (``backbone.`` stripped) and classifier
    (``head.fc.`` or ``head.`` stripped: ``weight``/``bias``) weights."""
    backbone, head = {}, {}
    for key, value in state_dict.items():
        head_prefix = next(
            (p for p in ('head.fc.', 'head.') if key.startswith(p)), None)
        if head_prefix is not None:
            head[key[len(head_prefix):]] = value
        else:
            backbone[re.sub(r'^backbone\.', '', key)] = value
    return backbone, head


def to_mmengine_checkpoint(backbone, meta, others=None):
    """``{'meta': meta, 'state_dict': ...}`` with the backbone under
    ``backbone.`` (for ``load_from`` or a ``Pretrained`` init_cfg) and
    ``others`` (heads, necks) under their full keys."""
    state_dict = {f'backbone.{k}': v.contiguous() for k, v in backbone.items()}
    state_dict.update(others or {})
    return dict(meta=meta, state_dict=state_dict)


def classifier_keys(head):
    """A classifier's ``weight`` and ``bias`` under ``head.fc.``."""
    return {f'head.fc.{k}': v for k, v in head.items()}


def detect_format(state_dict, formats, model):
    """The first ``(name, patterns)`` of ``formats`` whose every pattern
    matches some key; ValueError naming ``model`` when none does."""
    for name, patterns in formats:
        if all(any(re.match(p, k) for k in state_dict) for p in patterns):
            return name
    expected = '; '.join(f'{name}: {" and ".join(patterns)}'
                         for name, patterns in formats)
    raise ValueError(f'Not a {model} checkpoint: no key layout fits the keys '
                     f'(looked for {expected}).')


def match_arch(arch_zoo, names, sizes):
    """The first of ``names`` whose arch in ``arch_zoo`` has ``sizes``,
    else ``sizes``."""
    for name in names:
        arch = arch_zoo[name]
        if all(
                list(arch[k]) == v if isinstance(v, list) else arch[k] == v
                for k, v in sizes.items()):
            return name
    return sizes


def rename_keys(state_dict, rules):
    """Rename every key with the ``(pattern, replacement)`` rules of
    :func:`re.sub`, in order."""
    renamed = {}
    for key, value in state_dict.items():
        for pattern, replacement in rules:
            key = re.sub(pattern, replacement, key)
        renamed[key] = value
    return renamed


def fuse_projections(state_dict, parts, skip_with=None):
    """Stack the projections ``parts`` of every ``attn`` into ``attn.qkv``.

    ``parts`` are in output order, e.g. ``('q', 'kv')`` or ``('qk', 'v')``;
    attentions with a module named ``skip_with`` (a spatial reduction such
    as ``'sr'``) keep them separate.

    Examples:
        >>> fused = fuse_projections({
        ...     'blocks.0.attn.q.weight': torch.zeros(2, 2),
        ...     'blocks.0.attn.kv.weight': torch.zeros(4, 2)}, ('q', 'kv'))
        >>> {k: tuple(v.shape) for k, v in fused.items()}
        {'blocks.0.attn.qkv.weight': (6, 2)}
    """
    pattern = re.compile(r'^((?:.*\.)?attn)\.(' +
                         '|'.join(map(re.escape, parts)) + r')\.(\w+)$')
    fused = {}
    for key, value in state_dict.items():
        match = pattern.match(key)
        if not match or (skip_with and
                         f'{match.group(1)}.{skip_with}.weight' in state_dict):
            fused[key] = value
            continue
        attn, part, name = match.groups()
        if part == parts[0]:
            fused[f'{attn}.qkv.{name}'] = torch.cat(
                [state_dict[f'{attn}.{p}.{name}'] for p in parts])
    return fused


def count_numbered(state_dict, prefix):
    """The length of the ``ModuleList`` under ``prefix`` (e.g.
    ``'stages.1.blocks.'``), 0 if there is none."""
    pattern = re.compile(re.escape(prefix) + r'(\d+)\.')
    return 1 + max((int(m.group(1)) for m in map(pattern.match, state_dict)
                    if m),
                   default=-1)
