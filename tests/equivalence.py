"""Helpers for comparing mmtnt models with reference implementations."""
import pytest
import torch


def randomize_(model, seed=0, scale=0.05):
    """Perturb every parameter and buffer of ``model`` in place.

    Freshly initialised models have unit norm weights and zero biases, which
    hides swapped or missing terms; noise on everything exposes them.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in list(model.parameters()) + list(model.buffers()):
            if tensor.is_floating_point():
                noise = torch.randn(tensor.shape, generator=generator)
                tensor.add_(noise * scale)
    return model


def max_relative_error(actual, expected):
    """Largest absolute difference over the largest expected magnitude."""
    return ((actual - expected).abs().max() /
            expected.abs().max().clamp_min(1e-12)).item()


def timm_tiny_tnt():
    """timm's TNT with the sizes of ``tests/data/configs/tnt_tiny_cls.py``,
    random weights (skips the test where timm is missing)."""
    timm = pytest.importorskip('timm')
    model = timm.models.tnt.TNT(
        img_size=32, patch_size=8, embed_dim=32, inner_dim=8, depth=2,
        num_heads_inner=2, num_heads_outer=2, first_stride=2, num_classes=2)
    return randomize_(model, seed=0).eval()


def official_tnt_layout(timm_state_dict):
    """Rewrite timm TNT weights in the official repository's key layout
    (the inverse of timm's ``checkpoint_filter_fn``)."""
    renames = [('patch_pos', 'outer_pos'), ('pixel_embed', 'patch_embed'),
               ('norm1_proj', 'proj_norm1'), ('norm2_proj', 'proj_norm2'),
               ('norm_mlp_in', 'inner_norm2'), ('norm_in', 'inner_norm1'),
               ('attn_in', 'inner_attn'), ('mlp_in', 'inner_mlp'),
               ('norm_out', 'outer_norm1'), ('attn_out', 'outer_attn'),
               ('norm_mlp', 'outer_norm2'), ('.mlp.', '.outer_mlp.')]
    official = {}
    for key, value in timm_state_dict.items():
        if key == 'pixel_pos':
            official['inner_pos'] = value.flatten(2).transpose(1, 2)
            continue
        for old, new in renames:
            key = key.replace(old, new)
        official[key] = value
    num_patches = official['outer_pos'].shape[1] - 1
    official['outer_tokens'] = torch.zeros(1, num_patches,
                                           official['outer_pos'].shape[-1])
    return official
