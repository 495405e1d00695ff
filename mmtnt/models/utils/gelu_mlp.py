"""A two-layer GELU MLP that keeps less for its backward pass and runs
large inputs in row chunks.

For the backward pass of ``fc2(gelu(fc1(x)))`` autograd keeps two tensors of
the MLP's hidden width: the GELU's input and its output (the input of
``fc2``). The hidden width is 4 to 8 times the token width, so these two are
most of what a vision transformer keeps while training. :func:`gelu_mlp`
keeps only the GELU's input and recomputes its output in the backward pass:
one element-wise pass more, one hidden-width tensor less per block.

When a hidden-width tensor would be larger than 32 MiB (PCPVT's first stage
at batch 8, for instance), the rows are computed in chunks of about 2 MiB of
hidden width. With its default settings glibc, PyTorch's CPU allocator,
gives every block above 32 MiB (its largest dynamic mmap threshold) fresh
pages from the kernel, which zero-fills them at every use; such an MLP spent
more time in page faults than in its products
(:func:`mmtnt.utils.keep_freed_memory` changes that for a whole process).
Chunks are reused from the heap and stay in the cache between the two
layers. Chunked values and gradients equal the plain layers' up to rounding
(products over fewer rows, weight gradients summed over the chunks); below
the threshold everything is one chunk, computed in the plain layers' order.

The products are those of :func:`mmtnt.models.utils.linear` (oneDNN for CPU
float32).
"""
import torch
import torch.nn.functional as F

from .onednn_linear import onednn_matmul, records_gradients, uses_onednn

#: Hidden-width tensors above this size are computed in row chunks.
CHUNK_ABOVE_BYTES = 32 * 2**20
#: The hidden-width size of one chunk.
CHUNK_BYTES = 2 * 2**20


def rows_per_chunk(rows, hidden_features, element_size):
    """How many rows of the MLP to compute at once.

    Args:
        rows (int): Rows (tokens) of the input.
        hidden_features (int): Width of the hidden layer.
        element_size (int): Bytes per element.

    Returns:
        int: ``rows`` if the hidden tensor fits in
        :data:`CHUNK_ABOVE_BYTES`, otherwise the rows of about
        :data:`CHUNK_BYTES` of hidden width.

    Examples:
        >>> rows_per_chunk(6272, 1024, 4)  # 24.5 MiB: one chunk
        6272
        >>> rows_per_chunk(25088, 512, 4)  # 49 MiB: chunks of 2 MiB
        1024
    """
    row_bytes = hidden_features * element_size
    if rows * row_bytes <= CHUNK_ABOVE_BYTES:
        return rows
    return max(1, CHUNK_BYTES // row_bytes)


def _accumulate(total, a, b):
    """``total + a @ b``, in place; ``a @ b`` if ``total`` is None."""
    return torch.mm(a, b) if total is None else total.addmm_(a, b)


def _forward(x, weight1, bias1, weight2, bias2, approximate, chunk,
             product, keep_hidden):
    """The MLP on 2-D ``x``, ``chunk`` rows at a time, with ``product``
    (``F.linear`` or :func:`onednn_matmul`); returns the output and, with
    ``keep_hidden``, the GELU's inputs of the chunks (else an empty list,
    so that each chunk's is freed before the next)."""
    if chunk >= x.shape[0]:
        hidden = product(x, weight1, bias1)
        out = product(F.gelu(hidden, approximate=approximate), weight2,
                      bias2)
        return out, [hidden] if keep_hidden else []
    out = x.new_empty(x.shape[0], weight2.shape[0])
    hiddens = []
    for start in range(0, x.shape[0], chunk):
        hidden = product(x[start:start + chunk], weight1, bias1)
        out[start:start + chunk] = product(
            F.gelu(hidden, approximate=approximate), weight2, bias2)
        if keep_hidden:
            hiddens.append(hidden)
    return out, hiddens


class _GeluMlpFunction(torch.autograd.Function):
    """``fc2(gelu(fc1(x)))`` on 2-D inputs, keeping ``x`` and ``fc1(x)``."""

    @staticmethod
    def forward(ctx, x, weight1, bias1, weight2, bias2, approximate, chunk,
                product):
        out, hiddens = _forward(x, weight1, bias1, weight2, bias2,
                                approximate, chunk, product, True)
        ctx.save_for_backward(x, weight1, weight2, *hiddens)
        ctx.approximate = approximate
        ctx.chunk = chunk
        ctx.product = product
        ctx.has_bias = (bias1 is not None, bias2 is not None)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, weight1, weight2, *hiddens = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad_x = grad_weight1 = grad_bias1 = grad_weight2 = None
        for index, hidden in enumerate(hiddens):
            rows = slice(index * ctx.chunk, (index + 1) * ctx.chunk)
            grad_out_rows = grad_out[rows]
            if needs[3]:
                activation = F.gelu(hidden, approximate=ctx.approximate)
                grad_weight2 = _accumulate(grad_weight2, grad_out_rows.t(),
                                           activation)
                del activation
            if not any(needs[:3]):
                continue
            grad_hidden = ctx.product(grad_out_rows, weight2.t())
            # Written over the gradient of the GELU's output (element-wise).
            torch.ops.aten.gelu_backward.grad_input(
                grad_hidden, hidden, approximate=ctx.approximate,
                grad_input=grad_hidden)
            if needs[0]:
                grad_x_rows = ctx.product(grad_hidden, weight1.t())
                if len(hiddens) == 1:
                    grad_x = grad_x_rows
                else:
                    if grad_x is None:
                        grad_x = x.new_empty(x.shape)
                    grad_x[rows] = grad_x_rows
            if needs[1]:
                grad_weight1 = _accumulate(grad_weight1, grad_hidden.t(),
                                           x[rows])
            if needs[2] and ctx.has_bias[0]:
                grad_bias1 = grad_hidden.sum(0) if grad_bias1 is None \
                    else grad_bias1.add_(grad_hidden.sum(0))
        grad_bias2 = grad_out.sum(0) if needs[4] and ctx.has_bias[1] \
            else None
        return (grad_x, grad_weight1, grad_bias1, grad_weight2, grad_bias2,
                None, None, None)


def gelu_mlp(x, fc1, fc2, approximate='none'):
    """``fc2(gelu(fc1(x)))``, keeping one hidden-width tensor for backward
    instead of two, and in row chunks when the hidden tensor is large.

    Under autocast the inputs and weights are cast to the autocast dtype
    first, as :func:`torch.nn.functional.linear` would cast them.

    Args:
        x (Tensor): Input of shape (..., in_features).
        fc1 (nn.Linear): The first layer.
        fc2 (nn.Linear): The second layer.
        approximate (str): The GELU's ``approximate`` (``'none'`` or
            ``'tanh'``).

    Returns:
        Tensor: Shape (..., fc2.out_features).

    Examples:
        >>> import torch
        >>> import torch.nn as nn
        >>> fc1, fc2 = nn.Linear(8, 32), nn.Linear(32, 8)
        >>> x = torch.rand(2, 5, 8, requires_grad=True)
        >>> out = gelu_mlp(x, fc1, fc2)
        >>> torch.allclose(out, fc2(nn.functional.gelu(fc1(x))))
        True
    """
    params = [fc1.weight, fc1.bias, fc2.weight, fc2.bias]
    device_type = x.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        x = x.to(dtype)
        params = [p if p is None else p.to(dtype) for p in params]
    rows = x.reshape(-1, x.shape[-1])
    chunk = rows_per_chunk(rows.shape[0], fc1.out_features, x.element_size())
    with torch.autocast(device_type, enabled=False):
        product = onednn_matmul if uses_onednn(rows, params[0]) else F.linear
        if records_gradients(rows, *params):
            out = _GeluMlpFunction.apply(rows, *params, approximate, chunk,
                                         product)
        else:
            out = _forward(rows, *params, approximate, chunk, product,
                           False)[0]
    return out.view(*x.shape[:-1], out.shape[-1])
