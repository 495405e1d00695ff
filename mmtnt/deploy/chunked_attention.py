"""Attention over a whole token map with its queries in parts, for exported
segmentor and detector graphs (:func:`query_chunked_attention`).

At 512 to 1333 pixels a side the attention over a whole token map has
millions of (queries x keys) weights per head. PyTorch's fused attention
never forms them all; an exported ``MatMul``, ``Softmax``, ``MatMul``
would. In parts, ONNX Runtime holds 1/``chunks`` of them at a time.

The parts are one operator while the model is traced
(``mmtnt::attention_in_parts``), written out as ONNX nodes by
:func:`onnx_attention_in_parts` (:data:`ONNX_TRANSLATIONS`, which
:func:`mmtnt.deploy.export_onnx` hands to ``torch.onnx.export``). Traced
as PyTorch operators, each part's slice and products of a dynamic token
map are sympy expressions that ``torch.export`` reasons about: a
RetinaNet PyramidTNT-Ti of one block per stage took 275 s to trace its
backbone that way, 25 s without parts.
"""
from typing import Optional

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..models.layers import attention as attention_layers

#: The parts that the queries of an attention over a whole token map are
#: cut into in an exported graph (:func:`query_chunked_attention`). A part
#: holds 1/n of each head's (Nq x Nk) weights at a time, twice (before and
#: after the softmax): 2 x Nq x Nk / n floats per head, against the
#: 4 x head dim x Nq per head of the hidden activations of the MLP beside
#: it (MLP ratio 4); they are equal at n = Nk / (2 x head dim). Twins'
#: global attention has about 1050 keys at 800x1333 in every stage, and
#: head dims of 32 (SVT) or 64 (PCPVT): with 16 parts it needs no more
#: than the MLP.
ATTENTION_QUERY_CHUNKS = 16
#: Attention whose weights per batch entry and head (queries x keys) are
#: known during the export to be fewer than this (4 MiB in float32) is not
#: cut: the whole matrix is no burden, and parts would only add nodes.
MIN_CHUNKED_WEIGHTS = 2**20
#: The attention of exported graphs: two matrix products and a softmax
#: (:func:`mmtnt.models.layers.attention.explicit_attention`).
EXPLICIT_ATTENTION = attention_layers.explicit_attention


def cuts_queries(query, key):
    """Whether :func:`query_chunked_attention` cuts the queries: unless the
    weights per batch entry and head (queries x keys) are known, while the
    graph is traced, to be fewer than :data:`MIN_CHUNKED_WEIGHTS`.

    In a dynamic export the attention within windows (Twins' LSA) and
    sentences (TNT's and PyramidTNT's words), whose sizes the model fixes,
    stays whole, and attention over the whole token map, whose queries
    follow the input's size (a symbol), is cut. In a static export the
    sizes decide.

    Examples:
        >>> q, k = torch.rand(8, 4, 49, 32), torch.rand(8, 4, 49, 32)
        >>> cuts_queries(q, k), cuts_queries(torch.rand(1, 4, 4200, 32),
        ...                                  torch.rand(1, 4, 1050, 32))
        (False, True)
    """
    return not statically_known_true(
        query.shape[-2] * key.shape[-2] < MIN_CHUNKED_WEIGHTS)


def part_bounds(num_queries, chunks):
    """The first query of each of ``chunks`` parts, and the end:
    ``chunks + 1`` bounds ``i * num_queries // chunks``, so that the parts'
    sizes differ by 1 at most."""
    return [part * num_queries // chunks for part in range(chunks + 1)]


@torch.library.custom_op('mmtnt::attention_in_parts', mutates_args=())
def attention_in_parts(query: torch.Tensor, key: torch.Tensor,
                       value: torch.Tensor, attn_mask: Optional[torch.Tensor],
                       chunks: int, split_mask: bool) -> torch.Tensor:
    """:data:`EXPLICIT_ATTENTION` over ``chunks`` parts of the queries in
    turn (:func:`part_bounds`), the outputs joined on the queries' axis;
    ``split_mask``: whether ``attn_mask`` has a row per query (cut with
    them) or one row for all. See :func:`query_chunked_attention`."""
    outputs = []
    bounds = part_bounds(query.shape[-2], chunks)
    for start, end in zip(bounds[:-1], bounds[1:]):
        mask = attn_mask[..., start:end, :] if split_mask else attn_mask
        outputs.append(
            EXPLICIT_ATTENTION(query[..., start:end, :], key, value, mask))
    return torch.cat(outputs, dim=-2)


@attention_in_parts.register_fake
def _(query, key, value, attn_mask, chunks, split_mask):
    """The output's shape and dtype, for tracing."""
    return query.new_empty(*query.shape[:-1], value.shape[-1])


def onnx_attention_in_parts(query, key, value, attn_mask, chunks,
                            split_mask):
    """The ONNX nodes of ``mmtnt::attention_in_parts``, in ONNX Script
    (the exporter calls it with the operator's inputs as ONNX values): for
    each part, a ``Slice`` of the queries (and of the mask's rows, if
    ``split_mask``) between bounds computed from the number of queries in
    the graph, the explicit products as :data:`EXPLICIT_ATTENTION` writes
    them (``MatMul`` with the keys transposed on their last two axes,
    ``Softmax``, ``MatMul``), and a ``Concat`` of the parts.

    The float32 softmax of 16-bit logits is not written: exported graphs
    are float32."""
    from onnxscript import opset18 as op

    def indices(*values):
        return op.Constant(value_ints=list(values))

    def scalar_like(value, like):
        return op.CastLike(op.Constant(value_float=value), like)

    rank = len(query.shape)
    axis = indices(rank - 2)
    num_queries = op.Shape(query, start=-2, end=-1)
    # the head dim is fixed by the model, as in EXPLICIT_ATTENTION
    scale = scalar_like(query.shape[-1]**-0.5, query)
    keys_t = op.Transpose(
        key, perm=list(range(rank - 2)) + [rank - 1, rank - 2])
    float_mask = attn_mask is not None and attn_mask.dtype.is_floating_point()
    outputs = []
    for part in range(chunks):
        start, end = (op.Div(op.Mul(num_queries, indices(bound)),
                             indices(chunks)) for bound in (part, part + 1))
        queries = op.Slice(query, start, end, axis)
        mask = (op.Slice(attn_mask, start, end, axis)
                if split_mask else attn_mask)
        if float_mask:
            logits = op.Add(mask, op.Mul(op.MatMul(queries, keys_t), scale))
        else:
            logits = op.MatMul(op.Mul(queries, scale), keys_t)
            if mask is not None:
                logits = op.Where(mask, logits,
                                  scalar_like(float('-inf'), logits))
        outputs.append(op.MatMul(op.Softmax(logits, axis=-1), value))
    return op.Concat(*outputs, axis=rank - 2)


#: The ONNX translation of the operators that exported graphs trace
#: (``custom_translation_table`` of ``torch.onnx.export``).
ONNX_TRANSLATIONS = {
    torch.ops.mmtnt.attention_in_parts.default: onnx_attention_in_parts
}


def query_chunked_attention(query,
                            key,
                            value,
                            attn_mask=None,
                            dropout_p=0.,
                            chunks=ATTENTION_QUERY_CHUNKS):
    """The explicit attention (:data:`EXPLICIT_ATTENTION`) over ``chunks``
    parts of the queries in turn, the outputs joined, where
    :func:`cuts_queries` says so; else in one piece.

    The result is the same, since the softmax normalises each query's
    weights on their own; but a graph exported from it forms the weights of
    one part at a time, 1/``chunks`` of the (queries x keys) matrix, where
    PyTorch's fused attention never forms them all and a graph's
    ``MatMul``, ``Softmax``, ``MatMul`` would. The parts are one traced
    operator (``mmtnt::attention_in_parts``, see the module's docstring),
    whose ONNX nodes compute their bounds from the number of queries, so
    that they follow the input in a dynamic export.

    Args:
        query (Tensor): Shape (..., Nq, d).
        key (Tensor): Shape (..., Nk, d), the same leading axes.
        value (Tensor): Shape (..., Nk, d_v), the same leading axes.
        attn_mask (Tensor, optional): A float bias added to the logits, or
            a boolean mask, True where a query may attend a key; broadcast
            to (..., Nq, Nk), its queries' axis 1 or Nq.
        dropout_p (float): Dropout rate on the attention weights; with
            dropout the attention stays whole.
        chunks (int): The parts. Defaults to
            :data:`ATTENTION_QUERY_CHUNKS`.

    Returns:
        Tensor: Shape (..., Nq, d_v).

    Examples:
        >>> q, k = torch.rand(1, 4, 4200, 8), torch.rand(1, 4, 1050, 8)
        >>> torch.allclose(query_chunked_attention(q, k, k),
        ...                attention_layers.scaled_dot_product_attention(
        ...                    q, k, k), atol=1e-6)
        True
    """
    if dropout_p > 0 or not cuts_queries(query, key):
        return EXPLICIT_ATTENTION(query, key, value, attn_mask, dropout_p)
    split_mask = attn_mask is not None and not statically_known_true(
        attn_mask.shape[-2] == 1)
    return attention_in_parts(query, key, value, attn_mask, chunks,
                              split_mask)
