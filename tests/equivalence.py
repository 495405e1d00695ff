"""Helpers for comparing mmtnt models with reference implementations."""
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
