"""Helpers shared by the checkpoint converters."""
import pickle
import re

import torch

from mmtnt.utils import check_checkpoint_file


def load_checkpoint_file(path, allow_pickle=False):
    """Load a checkpoint file on the CPU.

    Loading uses ``weights_only=True`` unless ``allow_pickle`` is set: some
    released checkpoints hold pickled Python objects (training arguments)
    that a safe load refuses.

    Args:
        path (str): The checkpoint file.
        allow_pickle (bool): Load arbitrary pickled objects. Only for files
            from a source you trust. Defaults to False.

    Returns:
        dict: The loaded object.

    Raises:
        CheckpointFileError: If the file is missing, truncated or not a
            PyTorch checkpoint.
        RuntimeError: If it holds pickled objects and ``allow_pickle`` is
            not set.
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
    """Find the model weights in a loaded checkpoint.

    Accepts a bare state dict or one wrapped under ``state_dict``, ``model``
    or ``module`` (as OpenMMLab, timm's training script and the official
    repositories save them), and strips a ``module.`` prefix left by
    DataParallel.

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


def split_classifier(state_dict, backbone_prefixes=('backbone.', ),
                     head_prefixes=('head.fc.', 'head.')):
    """Split weights into backbone and classifier parts.

    Args:
        state_dict (dict[str, Tensor]): Weights, possibly of a whole
            classifier.
        backbone_prefixes (tuple[str]): Prefixes stripped from backbone keys.
        head_prefixes (tuple[str]): Prefixes that mark classifier keys; the
            first matching one is stripped.

    Returns:
        tuple[dict, dict]: Backbone weights and classifier weights (keys
        ``weight``/``bias``).
    """
    backbone, head = {}, {}
    for key, value in state_dict.items():
        head_prefix = next((p for p in head_prefixes if key.startswith(p)),
                           None)
        if head_prefix is not None:
            head[key[len(head_prefix):]] = value
            continue
        for prefix in backbone_prefixes:
            if key.startswith(prefix):
                key = key[len(prefix):]
                break
        backbone[key] = value
    return backbone, head


def to_mmengine_checkpoint(backbone, meta, others=None):
    """Assemble a converted checkpoint: backbone weights under
    ``backbone.``, so that the file serves as ``load_from`` of a config and
    as ``init_cfg=dict(type='Pretrained', checkpoint=...,
    prefix='backbone.')`` of a backbone.

    Args:
        backbone (dict[str, Tensor]): Backbone weights in mmtnt's layout.
        meta (dict): Plain-type metadata (strings, numbers).
        others (dict[str, Tensor], optional): The other weights, under
            their full keys: a classifier under ``head.fc.`` (mmpretrain's
            ``LinearClsHead``, :func:`classifier_keys`), the neck and heads
            of a detector or segmentor.

    Returns:
        dict: ``{'meta': meta, 'state_dict': weights}``.
    """
    state_dict = {f'backbone.{k}': v.contiguous() for k, v in backbone.items()}
    state_dict.update(others or {})
    return dict(meta=meta, state_dict=state_dict)


def classifier_keys(head):
    """A classifier's ``weight`` and ``bias`` under ``head.fc.``."""
    return {f'head.fc.{k}': v for k, v in head.items()}


def detect_format(state_dict, formats, model):
    """Tell which key layout of ``formats`` backbone weights have.

    Args:
        state_dict (dict[str, Tensor]): Backbone weights (no ``backbone.``
            prefix).
        formats (list[tuple[str, tuple[str]]]): ``(name, patterns)`` in the
            order tried; a layout is recognised when each of its patterns
            matches (:func:`re.match`) some key.
        model (str): The model family, for the error.

    Returns:
        str: The first layout recognised.

    Raises:
        ValueError: When none is; the message lists the keys looked for.

    Examples:
        >>> formats = [('mmtnt', ('^stem', )), ('official', ('^pos$', ))]
        >>> detect_format({'pos': None}, formats, 'TNT')
        'official'
    """
    for name, patterns in formats:
        if all(any(re.match(p, k) for k in state_dict) for p in patterns):
            return name
    expected = '; '.join(f'{name}: {" and ".join(patterns)}'
                         for name, patterns in formats)
    raise ValueError(f'Not a {model} checkpoint: no key layout fits the keys '
                     f'(looked for {expected}).')


def match_arch(arch_zoo, names, sizes):
    """The arch of ``arch_zoo`` that has ``sizes``.

    Args:
        arch_zoo (dict): A backbone's ``arch_zoo``.
        names (tuple[str]): The archs to compare, e.g. ``('s', 'b')``.
        sizes (dict): Sizes read from weights, as lists or numbers.

    Returns:
        str | dict: The first name in ``names`` whose arch has ``sizes``,
        else ``sizes``.
    """
    for name in names:
        arch = arch_zoo[name]
        if all(
                list(arch[k]) == v if isinstance(v, list) else arch[k] == v
                for k, v in sizes.items()):
            return name
    return sizes


def rename_keys(state_dict, rules):
    """Rename keys with ordered regular-expression rules.

    Args:
        state_dict (dict[str, Tensor]): The weights.
        rules (list[tuple[str, str]]): ``(pattern, replacement)`` pairs for
            :func:`re.sub`, applied in order to every key.

    Returns:
        dict[str, Tensor]: The renamed weights.
    """
    renamed = {}
    for key, value in state_dict.items():
        for pattern, replacement in rules:
            key = re.sub(pattern, replacement, key)
        renamed[key] = value
    return renamed


def fuse_projections(state_dict, parts, skip_with=None):
    """Concatenate an attention's separate input projections into ``qkv``.

    Every attention (a module named ``attn``) that has the projections
    ``parts`` gets one ``attn.qkv`` whose weight (and bias) is theirs
    stacked along the output channels, in the order of ``parts``.

    Args:
        state_dict (dict[str, Tensor]): The weights.
        parts (tuple[str]): The projections in their output order, e.g.
            ``('q', 'kv')`` (Twins, PyramidTNT) or ``('qk', 'v')`` (TNT).
        skip_with (str, optional): Keep the projections separate in the
            attentions that have a module of this name (a spatial
            reduction, e.g. ``'sr'``, makes keys and values read other
            tokens than the queries). Defaults to None: fuse everywhere.

    Returns:
        dict[str, Tensor]: The weights with the fused projections in place
        of the first part, the other parts dropped.

    Examples:
        >>> import torch
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
    """Count the numbered children (stages, blocks) under a key prefix.

    Args:
        state_dict (dict[str, Tensor]): The weights.
        prefix (str): What precedes the numbers, with its dot, e.g.
            ``'stages.'`` or ``'stages.1.blocks.'``.

    Returns:
        int: One more than the largest number that follows ``prefix`` in a
        key (the length of the ``ModuleList``), 0 if none does.

    Examples:
        >>> count_numbered({'stages.0.norm.weight': None,
        ...                 'stages.1.blocks.2.mlp.fc1.weight': None,
        ...                 'head.weight': None}, 'stages.1.blocks.')
        3
    """
    pattern = re.compile(re.escape(prefix) + r'(\d+)\.')
    return 1 + max((int(m.group(1)) for m in map(pattern.match, state_dict)
                    if m),
                   default=-1)
