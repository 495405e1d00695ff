"""Convert public TNT checkpoints into mmtnt's layout.

Key layouts: ``official`` (huawei-noah/Efficient-AI-Backbones: ``outer_pos``,
``blocks.i.inner_attn.qk``), ``timm`` (``patch_pos``, ``blocks.i.attn_in``)
and ``mmpretrain`` (``layers.i.inner_block``). Apart from the key names, the
weights have TNT's ``official`` or ``legacy`` pixel-embedding layout, which
:func:`detect_tnt_layout` reads from the shapes.
"""
from .common import (classifier_keys, count_numbered, detect_format,
                     extract_state_dict, fuse_projections, match_arch,
                     rename_keys, split_classifier, to_mmengine_checkpoint)

# Official names -> timm names, the first step for official checkpoints.
_OFFICIAL_TO_TIMM = [
    (r'^outer_pos$', 'patch_pos'),
    (r'^inner_pos$', 'pixel_pos'),
    (r'^patch_embed\.', 'pixel_embed.'),
    (r'proj_norm1', 'norm1_proj'),
    (r'proj_norm2', 'norm2_proj'),
    (r'\.inner_norm1\.', '.norm_in.'),
    (r'\.inner_attn\.', '.attn_in.'),
    (r'\.inner_norm2\.', '.norm_mlp_in.'),
    (r'\.inner_mlp\.', '.mlp_in.'),
    (r'\.outer_norm1\.', '.norm_out.'),
    (r'\.outer_attn\.', '.attn_out.'),
    (r'\.outer_norm2\.', '.norm_mlp.'),
    (r'\.outer_mlp\.', '.mlp.'),
]

# The embeddings, named alike by timm and mmpretrain -> mmtnt names.
_EMBEDDINGS_TO_MMTNT = [
    (r'^pixel_embed\.proj\.', 'word_embed.conv.'),
    (r'^pixel_pos$', 'word_pos'),
    (r'^patch_pos$', 'sentence_pos'),
    (r'^norm1_proj\.', 'sentence_proj.norm_in.'),
    (r'^norm2_proj\.', 'sentence_proj.norm_out.'),
]

# timm names -> mmtnt names (attention weights are fused separately). Block
# rules are anchored so that a renamed key never matches a later rule.
_TIMM_TO_MMTNT = _EMBEDDINGS_TO_MMTNT + [
    (r'^proj\.', 'sentence_proj.fc.'),
    (r'^(blocks\.\d+)\.norm_in\.', r'\1.inner.norm1.'),
    (r'^(blocks\.\d+)\.attn_in\.', r'\1.inner.attn.'),
    (r'^(blocks\.\d+)\.norm_mlp_in\.', r'\1.inner.norm2.'),
    (r'^(blocks\.\d+)\.mlp_in\.', r'\1.inner.mlp.'),
    (r'^(blocks\.\d+)\.norm1_proj\.', r'\1.words_to_sentence.norm_in.'),
    (r'^(blocks\.\d+)\.proj\.', r'\1.words_to_sentence.fc.'),
    (r'^(blocks\.\d+)\.norm2_proj\.', r'\1.words_to_sentence.norm_out.'),
    (r'^(blocks\.\d+)\.norm_out\.', r'\1.outer.norm1.'),
    (r'^(blocks\.\d+)\.attn_out\.', r'\1.outer.attn.'),
    (r'^(blocks\.\d+)\.norm_mlp\.', r'\1.outer.norm2.'),
    (r'^(blocks\.\d+)\.mlp\.', r'\1.outer.mlp.'),
]

# mmpretrain names -> mmtnt names.
_MMPRETRAIN_TO_MMTNT = _EMBEDDINGS_TO_MMTNT + [
    (r'^projection\.', 'sentence_proj.fc.'),
    (r'^layers\.', 'blocks.'),
    (r'\.inner_block\.', '.inner.'),
    (r'\.outer_block\.', '.outer.'),
    (r'\.norm_proj\.', '.words_to_sentence.norm_in.'),
    (r'\.projection\.', '.words_to_sentence.fc.'),
    (r'\.norm_attn\.', '.norm1.'),
    (r'\.attn\.attn\.in_proj_weight$', '.attn.qkv.weight'),
    (r'\.attn\.attn\.in_proj_bias$', '.attn.qkv.bias'),
    (r'\.attn\.attn\.out_proj\.', '.attn.proj.'),
    (r'\.norm_ffn\.', '.norm2.'),
    (r'\.ffn\.layers\.0\.0\.', '.mlp.fc1.'),
    (r'\.ffn\.layers\.1\.', '.mlp.fc2.'),
]


# The key layouts, told apart by their position embeddings and blocks.
_FORMATS = [
    ('official', (r'^outer_pos$', )),
    ('timm', (r'^patch_pos$', r'^blocks\.')),
    ('mmpretrain', (r'^patch_pos$', r'^layers\.')),
    ('mmtnt', (r'^sentence_pos$', )),
]


def detect_tnt_format(state_dict):
    """``'official'``, ``'timm'``, ``'mmpretrain'`` or ``'mmtnt'``: the key
    layout of TNT backbone weights."""
    return detect_format(state_dict, _FORMATS, 'TNT')


def _word_pos_as_tokens(state_dict):
    """timm's and mmpretrain's word_pos, (1, C, k, k), as (1, k*k, C)."""
    word_pos = state_dict['word_pos']
    return dict(state_dict, word_pos=word_pos.flatten(2).transpose(1, 2))


def _from_timm(state_dict):
    state_dict = _word_pos_as_tokens(rename_keys(state_dict, _TIMM_TO_MMTNT))
    return fuse_projections(state_dict, ('qk', 'v'))


def _from_official(state_dict):
    state_dict = dict(state_dict)
    state_dict.pop('outer_tokens', None)  # unused by the official model
    state_dict = rename_keys(state_dict, _OFFICIAL_TO_TIMM)
    state_dict = rename_keys(state_dict, _TIMM_TO_MMTNT)
    # The official inner_pos is already (1, k*k, C).
    return fuse_projections(state_dict, ('qk', 'v'))


def _from_mmpretrain(state_dict):
    return _word_pos_as_tokens(
        rename_keys(state_dict, _MMPRETRAIN_TO_MMTNT))


_CONVERTERS = {
    'official': _from_official,
    'timm': _from_timm,
    'mmpretrain': _from_mmpretrain,
    'mmtnt': dict,
}


def detect_tnt_layout(state_dict):
    """The pixel-embedding layout, ``'official'`` or ``'legacy'``, of TNT
    weights in mmtnt's key layout.

    Args:
        state_dict (dict[str, Tensor]): mmtnt TNT backbone weights.
    """
    norm = state_dict['blocks.0.words_to_sentence.norm_in.weight']
    inner_dims = state_dict['word_pos'].shape[-1]
    return 'legacy' if norm.numel() == inner_dims else 'official'


def describe_tnt_arch(state_dict):
    """The name in ``TNT.arch_zoo`` of mmtnt-layout weights, else their
    sizes."""
    from mmtnt.models.backbones.tnt import TNT
    sizes = dict(
        embed_dims_outer=state_dict['cls_token'].shape[-1],
        embed_dims_inner=state_dict['word_pos'].shape[-1],
        num_layers=count_numbered(state_dict, 'blocks.'))
    return match_arch(TNT.arch_zoo, ('s', 'b'), sizes)


def convert_tnt(checkpoint):
    """Convert a TNT checkpoint of any public layout into mmtnt's layout.

    Args:
        checkpoint (dict): A loaded checkpoint (bare or under
            ``state_dict``/``model``), with or without ``backbone.``.

    Returns:
        dict: ``{'meta': ..., 'state_dict': ...}``, the backbone under
        ``backbone.``, the classifier under ``head.fc.``; ``meta`` records
        the source format, arch and TNT layout to build with.

    Examples:
        >>> import timm
        >>> from mmtnt.converters import convert_tnt
        >>> model = timm.create_model('tnt_s_patch16_224')
        >>> ckpt = convert_tnt(model.state_dict())
        >>> ckpt['meta']['layout'], ckpt['meta']['source_format']
        ('official', 'timm')
    """
    state_dict = extract_state_dict(checkpoint)
    backbone, head = split_classifier(state_dict)
    source_format = detect_tnt_format(backbone)
    backbone = _CONVERTERS[source_format](backbone)
    meta = dict(
        model='TNT',
        source_format=source_format,
        arch=describe_tnt_arch(backbone),
        layout=detect_tnt_layout(backbone))
    return to_mmengine_checkpoint(backbone, meta, classifier_keys(head))
