"""Convert official PyramidTNT checkpoints (huawei-noah/Efficient-AI-Backbones
``ptnt_*``) into mmtnt's layout.

The conversion renames the keys (the merges move into the stage they feed),
fuses q and kv into ``qkv`` where both read the same tokens (the word
attention, and the sentence attention without spatial reduction), and folds
each stem convolution's bias into the running mean of the BatchNorm after it
(``BN(conv(x) + b)`` equals ``BN(conv(x))`` with ``running_mean - b``).
"""
import re

from .common import (classifier_keys, count_numbered, detect_format,
                     extract_state_dict, fuse_projections, match_arch,
                     rename_keys, split_classifier, to_mmengine_checkpoint)

# Official stem Sequential indices -> mmtnt stem modules.
_STEM_CONVS = {
    'common_conv.0': 'shared',
    'inner_convs.0': 'word_branch',
    'outer_convs.0': 'sentence_branch.0',
    'outer_convs.3': 'sentence_branch.1',
    'outer_convs.6': 'sentence_branch.2',
}

_OFFICIAL_TO_MMTNT = [
    (r'^outer_pos$', 'sentence_pos'),
    (r'^inner_pos$', 'word_pos'),
    (r'^word_merges\.(\d+)\.conv\.0\.', r'word_merges.\1.conv.'),
    (r'^sentence_merges\.(\d+)\.conv\.0\.', r'sentence_merges.\1.conv.'),
    (r'\.inner_norm1\.', '.inner.norm1.'),
    (r'\.inner_attn\.', '.inner.attn.'),
    (r'\.inner_norm2\.', '.inner.norm2.'),
    (r'\.inner_mlp\.', '.inner.mlp.'),
    (r'\.proj_norm1\.', '.words_to_sentence.norm_in.'),
    (r'\.(blocks\.\d+)\.proj\.', r'.\1.words_to_sentence.fc.'),
    (r'\.proj_norm2\.', '.words_to_sentence.norm_out.'),
    (r'\.outer_norm1\.', '.outer.norm1.'),
    (r'\.outer_attn\.linear\.', '.outer.attn.sr_proj.'),
    (r'\.outer_attn\.norm\.', '.outer.attn.sr_norm.'),
    (r'\.outer_attn\.', '.outer.attn.'),
    (r'\.outer_norm2\.', '.outer.norm2.'),
    (r'\.outer_mlp\.', '.outer.mlp.'),
]


_FORMATS = [
    ('official', (r'^outer_pos$', r'^word_merges\.')),
    ('mmtnt', (r'^sentence_pos$', r'^stem\.')),
]


def detect_pyramid_tnt_format(state_dict):
    """``'official'`` or ``'mmtnt'``: the key layout of PyramidTNT
    backbone weights."""
    return detect_format(state_dict, _FORMATS, 'PyramidTNT')


def _convert_stem(state_dict):
    converted = {}
    for key, value in state_dict.items():
        if not key.startswith('patch_embed.'):
            converted[key] = value
    for official, ours in _STEM_CONVS.items():
        conv = f'patch_embed.{official}.'
        index = int(official[-1])
        norm = f'patch_embed.{official[:-1]}{index + 1}.'
        converted[f'stem.{ours}.conv.weight'] = state_dict[conv + 'weight']
        bias = state_dict.get(conv + 'bias')
        for name in ('weight', 'bias', 'running_mean', 'running_var',
                     'num_batches_tracked'):
            if norm + name in state_dict:
                converted[f'stem.{ours}.norm.{name}'] = state_dict[norm +
                                                                   name]
        if bias is not None:
            converted[f'stem.{ours}.norm.running_mean'] = (
                state_dict[norm + 'running_mean'] - bias)
    return converted


def _move_merges_into_stages(state_dict):
    moved = {}
    for key, value in state_dict.items():
        match = re.match(r'^(word|sentence)_merges\.(\d+)\.(.*)$', key)
        if match:
            kind, index, rest = match.groups()
            key = f'stages.{int(index) + 1}.{kind}_merge.{rest}'
        moved[key] = value
    return moved


def _from_official(state_dict):
    state_dict = _convert_stem(state_dict)
    state_dict = rename_keys(state_dict, _OFFICIAL_TO_MMTNT)
    state_dict = _move_merges_into_stages(state_dict)
    return fuse_projections(state_dict, ('q', 'kv'), skip_with='sr_proj')


def describe_pyramid_tnt(state_dict):
    """The arch (a name in ``PyramidTNT.arch_zoo``, else the sizes) of
    mmtnt-layout weights, and the input size of their position terms (None
    when not square)."""
    from mmtnt.models.backbones.pyramid_tnt import PyramidTNT
    stages = range(count_numbered(state_dict, 'stages.'))
    depths = [
        count_numbered(state_dict, f'stages.{i}.blocks.') for i in stages
    ]
    outer_dims = [
        state_dict[f'stages.{i}.blocks.0.outer.norm1.weight'].numel()
        for i in stages
    ]
    inner_dims = [
        state_dict[f'stages.{i}.blocks.0.inner.mlp.fc2.weight'].shape[0]
        for i in stages
    ]
    heads = [state_dict[f'stages.{i}.relative_pos'].shape[1] for i in stages]
    sizes = dict(
        depths=depths,
        outer_dims=outer_dims,
        inner_dims=inner_dims,
        num_heads_outer=heads)
    arch = match_arch(PyramidTNT.arch_zoo, ('ti', 's', 'm', 'b'), sizes)
    num_sentences = state_dict['sentence_pos'].shape[1]
    side = int(round(num_sentences**0.5))
    img_size = side * 8 if side * side == num_sentences else None
    return arch, img_size


def convert_pyramid_tnt(checkpoint):
    """Convert a PyramidTNT checkpoint into mmtnt's layout.

    Args:
        checkpoint (dict): A loaded checkpoint (bare or under
            ``state_dict``/``model``), with or without ``backbone.``.

    Returns:
        dict: ``{'meta': ..., 'state_dict': ...}``, the backbone under
        ``backbone.``, the classifier under ``head.fc.``; ``meta`` records
        the source format, arch and input size of the position terms.

    Examples:
        >>> ckpt = convert_pyramid_tnt(load_checkpoint_file(
        ...     'ptnt_s_82.0.pth.tar'))  # doctest: +SKIP
        >>> ckpt['meta']['arch'], ckpt['meta']['img_size']  # doctest: +SKIP
        ('s', 256)
    """
    state_dict = extract_state_dict(checkpoint)
    backbone, head = split_classifier(state_dict)
    source_format = detect_pyramid_tnt_format(backbone)
    if source_format == 'official':
        backbone = _from_official(backbone)
    arch, img_size = describe_pyramid_tnt(backbone)
    meta = dict(
        model='PyramidTNT',
        source_format=source_format,
        arch=arch,
        img_size=img_size)
    return to_mmengine_checkpoint(backbone, meta, classifier_keys(head))
