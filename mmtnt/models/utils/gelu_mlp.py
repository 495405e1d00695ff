"""A two-layer GELU MLP that keeps less for its backward pass.

For the backward pass of ``fc2(gelu(fc1(x)))`` autograd keeps two tensors of
the MLP's hidden width: the GELU's input and its output (the input of
``fc2``). The hidden width is 4 to 8 times the token width, so these two are
most of what a vision transformer keeps while training. :func:`gelu_mlp`
keeps only the GELU's input and recomputes its output in the backward pass:
one element-wise pass more, one hidden-width tensor less per block. The
products and their order are those of the plain layers, so values and
gradients are the same.
"""
import torch
import torch.nn.functional as F


class _GeluMlpFunction(torch.autograd.Function):
    """``fc2(gelu(fc1(x)))`` on 2-D inputs, keeping ``x`` and ``fc1(x)``."""

    @staticmethod
    def forward(ctx, x, weight1, bias1, weight2, bias2, approximate):
        hidden = F.linear(x, weight1, bias1)
        out = F.linear(F.gelu(hidden, approximate=approximate), weight2,
                       bias2)
        ctx.save_for_backward(x, weight1, hidden, weight2)
        ctx.approximate = approximate
        ctx.has_bias = (bias1 is not None, bias2 is not None)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, weight1, hidden, weight2 = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad_weight2 = grad_bias2 = None
        if needs[3]:
            activation = F.gelu(hidden, approximate=ctx.approximate)
            grad_weight2 = grad_out.t().mm(activation)
            del activation
        if needs[4] and ctx.has_bias[1]:
            grad_bias2 = grad_out.sum(0)
        grad_x = grad_weight1 = grad_bias1 = None
        if any(needs[:3]):
            grad_hidden = grad_out.mm(weight2)
            # Written over the gradient of the GELU's output (element-wise).
            torch.ops.aten.gelu_backward.grad_input(
                grad_hidden, hidden, approximate=ctx.approximate,
                grad_input=grad_hidden)
            if needs[0]:
                grad_x = grad_hidden.mm(weight1)
            if needs[1]:
                grad_weight1 = grad_hidden.t().mm(x)
            if needs[2] and ctx.has_bias[0]:
                grad_bias1 = grad_hidden.sum(0)
        return (grad_x, grad_weight1, grad_bias1, grad_weight2, grad_bias2,
                None)


def gelu_mlp(x, fc1, fc2, approximate='none'):
    """``fc2(gelu(fc1(x)))``, keeping one hidden-width tensor for backward
    instead of two.

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
    with torch.autocast(device_type, enabled=False):
        out = _GeluMlpFunction.apply(x.reshape(-1, x.shape[-1]), *params,
                                     approximate)
    return out.view(*x.shape[:-1], out.shape[-1])
