"""The ONNX nodes of attention computed with its queries in parts.

Attention with ``attn_impl='parts'``
(:func:`mmtnt.models.layers.attention.parts_attention`) is one operator
while the model is traced, ``mmtnt::attention_in_parts``, so that
``torch.export`` does not reason about each part's slices of a dynamic
token map. :func:`onnx_attention_in_parts` writes it out as ONNX nodes
(:data:`ONNX_TRANSLATIONS`, which :func:`mmtnt.deploy.export_onnx` hands to
``torch.onnx.export``).
"""
import torch

# registers mmtnt::attention_in_parts
from ..models.layers import attention  # noqa: F401


def onnx_attention_in_parts(query, key, value, attn_mask, chunks,
                            split_mask):
    """The ONNX nodes of ``mmtnt::attention_in_parts``, in ONNX Script
    (the exporter calls it with the operator's inputs as ONNX values): for
    each part, a ``Slice`` of the queries (and of the mask's rows, if
    ``split_mask``) between bounds computed from the number of queries in
    the graph, the explicit products as
    :func:`~mmtnt.models.layers.attention.explicit_attention` writes them
    (``MatMul`` with the keys transposed on their last two axes,
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
    # the head dim is fixed by the model
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
