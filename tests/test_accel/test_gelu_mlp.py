"""The memory-saving MLP computes exactly what the plain layers compute."""
import importlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from mmtnt.accel import accelerate_for_cpu
from mmtnt.accel.gelu_mlp import gelu_mlp, rows_per_chunk
from mmtnt.accel.linear import OneDnnLinear
from mmtnt.models.layers import Mlp

gelu_mlp_module = importlib.import_module('mmtnt.accel.gelu_mlp')


def cpu_mlp(*args, **kwargs):
    """An MLP as the CPU accelerator makes it (oneDNN layers)."""
    return accelerate_for_cpu(Mlp(*args, **kwargs))


def plain_mlp(mlp, x):
    return mlp.fc2(mlp.act(mlp.fc1(x)))


def grads_of(mlp, x, forward):
    mlp.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_()
    out = forward(mlp, x)
    (out.square() * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
    return [out.detach(), x.grad] + [p.grad for p in mlp.parameters()]


@pytest.mark.parametrize('approximate', ['none', 'tanh'])
def test_same_values_and_gradients_as_plain_layers(approximate):
    torch.manual_seed(0)
    mlp = cpu_mlp(24, 96, act_cfg=dict(type='GELU', approximate=approximate))
    x = torch.randn(3, 37, 24)
    ours = grads_of(mlp, x, lambda m, t: m(t))
    plain = grads_of(mlp, x, plain_mlp)
    for a, b in zip(ours, plain):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_keeps_one_hidden_tensor_for_backward():
    """The plain layers keep the GELU's input and output; gelu_mlp only the
    input."""
    torch.manual_seed(0)
    mlp = cpu_mlp(8, 512)
    x = torch.randn(3, 8, requires_grad=True)

    def hidden_tensors_kept(forward):
        kept = []

        def pack(tensor):
            if tensor.shape == (3, 512):
                kept.append(tensor.data_ptr())
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            forward(mlp, x)
        return len(set(kept))

    assert hidden_tensors_kept(plain_mlp) == 2
    assert hidden_tensors_kept(lambda m, t: m(t)) == 1


def test_frozen_layers_and_inputs_without_gradients():
    torch.manual_seed(0)
    mlp = cpu_mlp(16, 64)
    mlp.fc1.requires_grad_(False)
    x = torch.randn(5, 16)
    out = mlp(x)
    out.sum().backward()
    assert mlp.fc1.weight.grad is None
    torch.testing.assert_close(out, plain_mlp(mlp, x), rtol=0, atol=0)
    expected = torch.autograd.grad(plain_mlp(mlp, x).sum(), mlp.fc2.weight)[0]
    torch.testing.assert_close(mlp.fc2.weight.grad, expected)


def test_autocast_casts_like_linear():
    torch.manual_seed(0)
    mlp = cpu_mlp(16, 64)
    x = torch.randn(4, 16, requires_grad=True)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        ours, plain = mlp(x), plain_mlp(mlp, x)
    assert ours.dtype == plain.dtype == torch.bfloat16
    torch.testing.assert_close(ours, plain, rtol=0, atol=0)
    ours.float().sum().backward()
    assert mlp.fc1.weight.grad.dtype == torch.float32


def test_plain_layers_with_dropout_or_other_activations():
    """Dropout in training and non-GELU activations take the plain path
    (the saved-tensor trick only covers the GELU)."""
    mlp = cpu_mlp(8, 32, act_cfg=dict(type='ReLU'))
    assert not mlp._uses_gelu_mlp()
    mlp = cpu_mlp(8, 32, drop=0.1).train()
    assert not mlp._uses_gelu_mlp()
    assert mlp.eval()._uses_gelu_mlp()
    with torch.no_grad():
        assert mlp._uses_gelu_mlp()


def test_rows_per_chunk():
    assert rows_per_chunk(16384, 512, 4) == 16384  # 32 MiB: one chunk
    assert rows_per_chunk(16385, 512, 4) == 1024
    assert rows_per_chunk(32768, 512, 2) == 32768
    assert rows_per_chunk(10**6, 2**22, 4) == 1


@pytest.mark.parametrize('bias', [True, False])
def test_chunks_give_the_values_and_gradients_of_plain_layers(
        monkeypatch, bias):
    """Above the size limit the rows are computed in chunks (here 7 chunks
    of 16 rows and one of 5): values and gradients are the plain layers' up
    to rounding (products over fewer rows, weight gradients summed over the
    chunks)."""
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_ABOVE_BYTES', 4 * 64 * 100)
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_BYTES', 4 * 64 * 16)
    torch.manual_seed(0)
    mlp = cpu_mlp(24, 64)
    if not bias:
        mlp.fc1.bias = mlp.fc2.bias = None
    x = torch.randn(3, 39, 24)
    ours = grads_of(mlp, x, lambda m, t: m(t))
    plain = grads_of(mlp, x, plain_mlp)
    assert all((a is None) == (b is None) for a, b in zip(ours, plain))
    for a, b in zip(ours, plain):
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        torch.testing.assert_close(mlp(x), ours[0], rtol=0, atol=0)


def test_chunks_keep_one_hidden_tensor_and_no_whole_temporaries(monkeypatch):
    """In chunks, only the chunks' GELU inputs stay for backward; the
    GELU's output is never made for all rows at once."""
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_ABOVE_BYTES', 4 * 512 * 100)
    monkeypatch.setattr(gelu_mlp_module, 'CHUNK_BYTES', 4 * 512 * 64)
    mlp = cpu_mlp(8, 512)
    x = torch.randn(256, 8, requires_grad=True)
    kept = []
    with torch.autograd.graph.saved_tensors_hooks(
            lambda t: kept.append(tuple(t.shape)) or t, lambda t: t):
        out = mlp(x)
    assert sorted(kept) == sorted([(256, 8), (512, 8), (8, 512)] +
                                  [(64, 512)] * 4)
    out.sum().backward()
    assert x.grad.shape == x.shape


@pytest.mark.parametrize('layer', [OneDnnLinear, nn.Linear])
def test_function_form_matches_functional(layer):
    """Same products as OneDnnLinear; torch's Linear
    (BLAS) agrees up to rounding."""
    torch.manual_seed(0)
    fc1, fc2 = layer(6, 12, bias=False), layer(12, 6)
    x = torch.randn(2, 3, 6)
    tol = 0 if layer is OneDnnLinear else 1e-6
    torch.testing.assert_close(
        gelu_mlp(x, fc1, fc2), fc2(F.gelu(fc1(x))), rtol=tol, atol=tol)


def grads_with_norm(mlp, norm, x, inside):
    """Values and gradients of ``mlp`` after ``norm``: computed inside the
    MLP, or by the norm first."""
    norm.zero_grad(set_to_none=True)
    forward = (lambda m, t: m(t, norm=norm)) if inside else (
        lambda m, t: plain_mlp(m, norm(t)))
    grads = grads_of(mlp, x, forward)
    return grads + [p.grad for p in norm.parameters()]


@pytest.mark.parametrize('chunked', [False, True])
@pytest.mark.parametrize('affine', [True, False])
def test_norm_inside_gives_values_and_gradients_of_norm_first(
        monkeypatch, chunked, affine):
    """The LayerNorm recomputed in the backward pass gives the values and
    gradients (the norm's own included) of the norm followed by the plain
    layers: exactly in one chunk, up to rounding over chunks."""
    if chunked:
        monkeypatch.setattr(gelu_mlp_module, 'CHUNK_ABOVE_BYTES', 4 * 64 * 100)
        monkeypatch.setattr(gelu_mlp_module, 'CHUNK_BYTES', 4 * 64 * 16)
    torch.manual_seed(0)
    mlp = cpu_mlp(24, 64)
    norm = nn.LayerNorm(24, eps=1e-6, elementwise_affine=affine)
    if affine:
        nn.init.normal_(norm.weight)
        nn.init.normal_(norm.bias)
    x = torch.randn(3, 39, 24) * 3 + 1
    ours = grads_with_norm(mlp, norm, x, inside=True)
    plain = grads_with_norm(mlp, norm, x, inside=False)
    assert len(ours) == len(plain) == 6 + 2 * affine
    tol = dict(rtol=1e-5, atol=1e-5) if chunked else dict(rtol=0, atol=0)
    for a, b in zip(ours, plain):
        torch.testing.assert_close(a, b, **tol)
    with torch.no_grad():
        torch.testing.assert_close(mlp(x, norm=norm), ours[0], **tol)


def test_norm_inside_keeps_its_input_not_its_output():
    """Norm first, autograd keeps the norm's input and its output (the first
    layer's input); inside the MLP, only the input."""
    torch.manual_seed(0)
    mlp, norm = cpu_mlp(8, 32), nn.LayerNorm(8)
    x = torch.randn(5, 8, requires_grad=True)

    def token_tensors_kept(forward):
        kept = set()

        def pack(tensor):
            if tensor.shape == x.shape:
                kept.add(tensor.data_ptr())
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            forward()
        return kept

    assert len(token_tensors_kept(lambda: mlp(norm(x)))) == 2
    assert token_tensors_kept(lambda: mlp(x, norm=norm)) == {x.data_ptr()}


def test_norm_inside_frozen_parts():
    """Frozen norm or first layer, and inputs without gradients."""
    torch.manual_seed(0)
    mlp, norm = cpu_mlp(16, 64), nn.LayerNorm(16)
    norm.requires_grad_(False)
    mlp.fc1.requires_grad_(False)
    x = torch.randn(5, 16)
    out = mlp(x, norm=norm)
    out.sum().backward()
    assert norm.weight.grad is None and mlp.fc1.weight.grad is None
    expected = torch.autograd.grad(
        plain_mlp(mlp, norm(x)).sum(), mlp.fc2.weight)[0]
    torch.testing.assert_close(mlp.fc2.weight.grad, expected)
    norm.requires_grad_(True)
    mlp(x, norm=norm).sum().backward()
    expected = torch.autograd.grad(
        plain_mlp(mlp, norm(x)).sum(), norm.weight)[0]
    torch.testing.assert_close(norm.weight.grad, expected)


@pytest.mark.parametrize('norm', [
    nn.LayerNorm((4, 16)),  # not over the channels alone
    nn.BatchNorm1d(4),
])
def test_other_norms_run_first(norm):
    torch.manual_seed(0)
    mlp = cpu_mlp(16, 64)
    x = torch.randn(2, 4, 16)
    torch.testing.assert_close(
        mlp(x, norm=norm), plain_mlp(mlp, norm(x)), rtol=0, atol=0)


def test_norm_under_autocast_runs_before_the_casts():
    torch.manual_seed(0)
    mlp, norm = cpu_mlp(16, 64), nn.LayerNorm(16)
    x = torch.randn(4, 16, requires_grad=True)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        ours, plain = mlp(x, norm=norm), plain_mlp(mlp, norm(x))
    assert ours.dtype == torch.bfloat16
    torch.testing.assert_close(ours, plain, rtol=0, atol=0)
