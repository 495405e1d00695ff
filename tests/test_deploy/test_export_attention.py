"""Attention in exported graphs: explicit products, whose keys are
transposed on their last two axes only, and the queries cut into parts
(``attn_impl='parts'``: :func:`mmtnt.models.layers.attention.
parts_attention`, one traced operator written out as ONNX nodes) where the
weights are many give the plain attention's result, in PyTorch and in ONNX
Runtime against an export without the parts and against eager PyTorch;
the model has its own settings again afterwards, and classifiers are
exported without parts."""
import numpy as np
import pytest
import torch
import torch.nn as nn
from onnx_graphs import graph_nodes, op_types

from mmtnt.deploy import cpu_session, export_onnx
from mmtnt.deploy.graphs import ClassifierGraph, export_friendly
from mmtnt.models import set_attention_impl
from mmtnt.models.layers import attention as attention_layers
from mmtnt.models.layers.attention import (ATTENTION_QUERY_CHUNKS,
                                           cuts_queries, explicit_attention,
                                           parts_attention,
                                           scaled_dot_product_attention)
from mmtnt.models.layers.layout import map_to_tokens

# Float32 rounding: the parts' products are summed in another order.
ATOL = 1e-5


def attention_inputs(num_queries, num_keys, mask=None, seed=0):
    """query (2, 3, Nq, 8), key and value (2, 3, Nk, 8) and a mask:
    ``'bias'`` float (1, 3, Nq, Nk), ``'keys'`` boolean (2, 1, 1, Nk),
    True for all keys but the last (padding masks of windows)."""
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(2, 3, num_queries, 8, generator=generator)
    key, value = torch.randn(2, 2, 3, num_keys, 8, generator=generator)
    attn_mask = None
    if mask == 'bias':
        attn_mask = torch.randn(1, 3, num_queries, num_keys,
                                generator=generator)
    elif mask == 'keys':
        attn_mask = torch.ones(2, 1, 1, num_keys, dtype=torch.bool)
        attn_mask[..., -1] = False
    return query, key, value, attn_mask


@pytest.mark.parametrize('mask', [None, 'bias', 'keys'])
@pytest.mark.parametrize('num_queries,num_keys', [(100, 25), (49, 49),
                                                  (3, 16)])
def test_parts_give_the_plain_attention(mask, num_queries, num_keys,
                                        monkeypatch):
    inputs = attention_inputs(num_queries, num_keys, mask)
    expected = scaled_dot_product_attention(*inputs)
    parts = []

    def explicit(query, key, value, attn_mask, dropout_p=0.):
        parts.append(query.shape[-2])
        if attn_mask is not None:
            assert attn_mask.shape[-2] in (1, query.shape[-2])
        return explicit_attention(query, key, value, attn_mask, dropout_p)

    monkeypatch.setattr(attention_layers, 'MIN_CHUNKED_WEIGHTS', 0)
    monkeypatch.setattr(attention_layers, 'explicit_attention', explicit)
    chunked = parts_attention(*inputs)
    assert len(parts) == ATTENTION_QUERY_CHUNKS
    assert sum(parts) == num_queries
    assert max(parts) - min(parts) <= 1
    torch.testing.assert_close(chunked, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize('num_queries,num_keys,cut', [
    (49, 49, False),  # a window
    (3136, 49, False),  # Twins' first stage at 224x224
    (4200, 1050, True),  # its third stage at 800x1333
])
def test_only_many_weights_are_cut(num_queries, num_keys, cut):
    query, key, value, _ = attention_inputs(num_queries, num_keys)
    assert cuts_queries(query, key) == cut


def test_unknown_attention_impl_is_refused():
    layer = attention_layers.MultiheadAttention(8, 2)
    with pytest.raises(ValueError, match="'auto', 'explicit', 'parts'"):
        set_attention_impl(nn.Sequential(layer), 'fused')
    assert layer.attn_impl == 'auto'


def test_export_sets_the_attention_impl_for_the_block_only():
    layer = attention_layers.SpatialReductionAttention(32, 2, sr_ratio=2)
    preset = attention_layers.MultiheadAttention(32, 2)
    set_attention_impl(preset, 'explicit')
    tokens = torch.randn(1, 12 * 10, 32)
    plain = layer(tokens, (12, 10))
    with export_friendly(nn.Sequential(layer, preset)):
        assert (layer.attn_impl, preset.attn_impl) == ('parts', 'parts')
        chunked = layer(tokens, (12, 10))
    # classifiers keep their attention whole
    with export_friendly(ClassifierGraph(nn.Sequential(layer, preset))):
        assert (layer.attn_impl, preset.attn_impl) == ('explicit',
                                                       'explicit')
    assert (layer.attn_impl, preset.attn_impl) == ('auto', 'explicit')
    assert 'attn_impl' not in vars(layer)
    torch.testing.assert_close(chunked, plain, atol=ATOL, rtol=0)


class Attentions(nn.Module):
    """Patch embedding, windowed attention (padding masks broadcast over
    the queries) and global sub-sampled attention with a bias over the
    queries, each added to the tokens: the attention calls of the three
    families, small enough to export in seconds."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Conv2d(3, 16, kernel_size=4, stride=4)
        self.windows = attention_layers.LocallyGroupedAttention(
            16, 2, window_size=7)
        self.global_ = attention_layers.SpatialReductionAttention(
            16, 2, sr_ratio=4)

    def forward(self, x):
        fmap = self.embed(x)
        hw_shape = fmap.shape[2:]
        tokens = map_to_tokens(fmap)
        tokens = tokens + self.windows(tokens, hw_shape)
        bias = tokens.mean(-1)[:, None, :, None]  # (B, 1, Nq, 1)
        return tokens + self.global_(tokens, hw_shape, bias)


class Classifier(nn.Module):
    """A module called as mmpretrain calls a classifier, for
    :class:`ClassifierGraph`."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, inputs, mode):
        return self.module(inputs)


def test_chunked_export_matches_the_unchunked_one(tmp_path):
    """Segmentors and detectors are exported with parts, classifiers
    without."""
    torch.manual_seed(0)
    module = Attentions().eval()
    files = dict(chunked=str(tmp_path / 'chunked.onnx'),
                 plain=str(tmp_path / 'plain.onnx'))
    export_onnx(module, files['chunked'], (64, 64), dynamic=True)
    export_onnx(ClassifierGraph(Classifier(module), logits=True),
                files['plain'], (64, 64), dynamic=True, channels=3)
    softmaxes = {kind: op_types(f)['Softmax'] for kind, f in files.items()}
    # the windows whole, the global attention in parts
    assert softmaxes == dict(plain=2, chunked=1 + ATTENTION_QUERY_CHUNKS)
    sessions = {kind: cpu_session(f, num_threads=1)
                for kind, f in files.items()}
    generator = np.random.default_rng(0)
    # token maps of 25x41 (padded windows, 1025 queries: parts of 128 and
    # 129) and 14x28 (no padding), another batch
    for shape in [(2, 3, 100, 164), (1, 3, 56, 112)]:
        images = generator.standard_normal(shape, np.float32)
        outputs = {kind: session.run(None, {'input': images})[0]
                   for kind, session in sessions.items()}
        with torch.no_grad():
            eager = module(torch.from_numpy(images)).numpy()
        np.testing.assert_allclose(outputs['chunked'], outputs['plain'],
                                   atol=ATOL, rtol=0)
        np.testing.assert_allclose(outputs['chunked'], eager, atol=ATOL,
                                   rtol=0)


class AttentionInParts(nn.Module):
    """Attention in parts over the 4x4-pooled tokens of an input
    (B, 16, H, W) to its 8x8-pooled ones, 2 heads of 8 channels, with each
    kind of mask: none, a float bias per query, a boolean mask per key
    (broadcast over the queries) and one per query (each with its first
    key allowed); the four results stacked."""

    MASKS = (None, 'bias', 'keys', 'queries')

    @staticmethod
    def heads(x, pool):
        tokens = map_to_tokens(nn.functional.avg_pool2d(x, pool))
        return tokens.unflatten(-1, (2, 8)).transpose(1, 2)

    def inputs(self, x, mask):
        """query (B, 2, Nq, 8), key = value (B, 2, Nk, 8) and the mask."""
        query, key = self.heads(x, 4), self.heads(x, 8)
        first_key = torch.arange(key.shape[-2]) == 0  # allowed to all
        attn_mask = None
        if mask == 'bias':
            attn_mask = query.mean(-1, keepdim=True) * key.mean(-1)[:, :,
                                                                    None]
        elif mask == 'keys':
            attn_mask = (key[:, :1, None, :, 0] > 0) | first_key
        elif mask == 'queries':
            attn_mask = (query[:, :1, :, :1] * key[:, :1, None, :, 0] >
                         0) | first_key
        return query, key, key, attn_mask

    def forward(self, x):
        return torch.stack([
            parts_attention(*self.inputs(x, mask))
            for mask in self.MASKS
        ])


def test_parts_export_to_onnx_for_every_mask(tmp_path):
    """``mmtnt::attention_in_parts``'s ONNX nodes, in a dynamic export,
    give PyTorch's attention at other sizes and batches."""
    torch.manual_seed(0)
    module = AttentionInParts().eval()
    onnx_file = str(tmp_path / 'parts.onnx')
    export_onnx(module, onnx_file, (64, 64), dynamic=True, channels=16)
    assert op_types(onnx_file)['Softmax'] == 4 * ATTENTION_QUERY_CHUNKS
    session = cpu_session(onnx_file, num_threads=1)
    generator = np.random.default_rng(0)
    # 180 queries (parts of 11 and 12) and 45 keys; 35 and 6
    for shape in [(2, 16, 40, 72), (1, 16, 28, 20)]:
        images = torch.from_numpy(generator.standard_normal(
            shape, np.float32))
        output, = session.run(None, {'input': images.numpy()})
        for kind, result in zip(module.MASKS, output):
            expected = scaled_dot_product_attention(
                *module.inputs(images, kind))
            np.testing.assert_allclose(
                result, expected.numpy(), atol=ATOL, rtol=0, err_msg=kind)


def transpose_perms(onnx_file):
    """The ``perm`` of every Transpose node of an ONNX file (in functions
    too)."""
    return [
        list(attribute.ints) for node in graph_nodes(onnx_file)
        if node.op_type == 'Transpose' for attribute in node.attribute
        if attribute.name == 'perm'
    ]


class WordAttention(nn.Module):
    """TNT's word attention over the sentences (16 words of 24 channels) of
    an input (B, sentences, 16, 24)."""

    def __init__(self):
        super().__init__()
        self.attention = attention_layers.MultiheadAttention(24, 4)

    def forward(self, x):
        return self.attention(x.flatten(0, 1))


def test_keys_are_transposed_on_their_last_two_axes(tmp_path):
    """The exporter's decomposition of PyTorch's fused attention reshapes
    the keys to 3-D around their transpose (``perm`` [0, 2, 1]), which ONNX
    Runtime cannot fold into the product; the exported explicit products
    transpose the 4-D keys' last two axes."""
    torch.manual_seed(0)
    module = WordAttention().eval()
    files = dict(exported=str(tmp_path / 'exported.onnx'),
                 fused=str(tmp_path / 'fused.onnx'))
    sentences = torch.randn(1, 6, 16, 24)
    export_onnx(module, files['exported'], (16, 24), dynamic=False,
                channels=6)
    # the plain model's attention, fused, as PyTorch exports it
    with torch.no_grad():
        torch.onnx.export(module, (sentences, ), files['fused'],
                          dynamo=True)
    perms = {kind: transpose_perms(f) for kind, f in files.items()}
    assert [0, 2, 1] in perms['fused']
    assert [0, 2, 1] not in perms['exported']
    assert [0, 1, 3, 2] in perms['exported']
    session = cpu_session(files['exported'], num_threads=1)
    output, = session.run(None, {'input': sentences.numpy()})
    with torch.no_grad():
        expected = module(sentences).numpy()
    np.testing.assert_allclose(output, expected, atol=ATOL, rtol=0)
