"""CPU versions of the plain layers (same state dict, same function), which
:func:`mmtnt.accel.accelerate_for_cpu` puts in place of the plain ones."""
import torch.nn as nn

from ..models.layers import Mlp, TransformerBlock
from .gelu_mlp import gelu_mlp
from .linear import (can_fuse, is_traced, linear_add, linear_gelu,
                     records_gradients)


class CpuConv2d(nn.Conv2d):
    """:class:`torch.nn.Conv2d` whose weight is stored channels-last, which
    oneDNN's NHWC kernels run faster in inference. Where autograd records,
    it reads a contiguous copy of the weight: the channels-last
    weight-gradient kernel loses precision over large maps."""

    def forward(self, x):
        weight = self.weight
        if records_gradients(x, weight, self.bias):
            weight = weight.contiguous()
        return self._conv_forward(x, weight, self.bias)


class CpuMlp(Mlp):
    """:class:`Mlp` computed by :func:`gelu_mlp` (with the block's norm)
    when the activation is a GELU, dropout is off and nothing traces."""

    def forward(self, x, norm=None):
        """``fc2(act(fc1(norm(x))))``; ``norm`` is optional."""
        if self._uses_gelu_mlp():
            return gelu_mlp(x, self.fc1, self.fc2, self.act.approximate,
                            norm=norm)
        return super().forward(x if norm is None else norm(x))

    def _uses_gelu_mlp(self):
        return (isinstance(self.act, nn.GELU)
                and not (self.training and self.drop.p > 0)
                and not is_traced())


class CpuTransformerBlock(TransformerBlock):
    """:class:`TransformerBlock` for the CPU (its MLP a :class:`CpuMlp`):
    in float32 inference the residual additions and an exact GELU run as
    oneDNN post-ops; otherwise the MLP computes the second norm inside."""

    def forward(self, x, hw_shape=None, attn_bias=None):
        if can_fuse(x, self.training):
            return self._fused_inference(x, hw_shape, attn_bias)
        x = x + self.drop_path(
            self.attn(self.norm1(x), hw_shape, attn_bias))
        return x + self.drop_path(self.mlp(x, norm=self.norm2))

    def _fused_inference(self, x, hw_shape, attn_bias):
        attn = self.attn
        x = linear_add(
            attn.attend(self.norm1(x), hw_shape, attn_bias), attn.proj, x)
        hidden = self.norm2(x)
        act = self.mlp.act
        if isinstance(act, nn.GELU) and act.approximate == 'none':
            hidden = linear_gelu(hidden, self.mlp.fc1)
        else:
            hidden = act(self.mlp.fc1(hidden))
        return linear_add(hidden, self.mlp.fc2, x)
