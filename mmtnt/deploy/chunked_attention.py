"""The ONNX nodes of ``mmtnt::attention_in_parts``, the one operator that
``attn_impl='parts'`` is traced as (:data:`ONNX_TRANSLATIONS`, for
``torch.onnx.export``)."""
import torch

# registers mmtnt::attention_in_parts
from ..models.layers import attention  # noqa: F401


def onnx_attention_in_parts(query, key, value, attn_mask, chunks,
                            split_mask):
    """``mmtnt::attention_in_parts`` in ONNX Script: per part, a ``Slice``
    of the queries (and mask rows) with bounds from the graph's query count,
    the explicit products, then a ``Concat`` (graphs are float32, so no
    float32 softmax)."""
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


#: ``custom_translation_table`` of ``torch.onnx.export``.
ONNX_TRANSLATIONS = {
    torch.ops.mmtnt.attention_in_parts.default: onnx_attention_in_parts
}
