import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmcv.cnn.bricks import DropPath

from .attention import MultiheadSelfAttention
from .gelu_mlp import gelu_mlp
from .onednn_linear import Linear
from .tracing import is_traced


class Mlp(nn.Module):
    """Two linear layers with an activation between them.

    With a GELU and no dropout, training keeps one hidden-width tensor for
    the backward pass instead of two, and large inputs are computed in row
    chunks (:func:`gelu_mlp`); the values and gradients are those of the
    plain layers. A pre-norm block passes its norm to :meth:`forward`: a
    LayerNorm's output is then recomputed in the backward pass instead of
    kept.

    Args:
        in_dims (int): Input and output channels.
        hidden_dims (int): Channels between the two layers.
        act_cfg (dict): The activation. Defaults to ``dict(type='GELU')``.
        drop (float): Dropout rate after each layer. Defaults to 0.

    Examples:
        >>> import torch
        >>> mlp = Mlp(in_dims=32, hidden_dims=128)
        >>> mlp(torch.rand(2, 5, 32), norm=nn.LayerNorm(32)).shape
        torch.Size([2, 5, 32])
    """

    def __init__(self, in_dims, hidden_dims, act_cfg=dict(type='GELU'),
                 drop=0.):
        super().__init__()
        self.fc1 = Linear(in_dims, hidden_dims)
        self.act = build_activation_layer(act_cfg)
        self.fc2 = Linear(hidden_dims, in_dims)
        self.drop = nn.Dropout(drop)

    def forward(self, x, norm=None):
        """``fc2(act(fc1(norm(x))))`` (dropout after each layer).

        Args:
            x (Tensor): Tokens of shape (..., in_dims).
            norm (nn.Module, optional): A norm applied to ``x`` first.
        """
        if self._uses_gelu_mlp():
            return gelu_mlp(x, self.fc1, self.fc2, self.act.approximate,
                            norm=norm)
        if norm is not None:
            x = norm(x)
        x = self.drop(self.act(self.fc1(x)))
        return self.drop(self.fc2(x))

    def _uses_gelu_mlp(self):
        """Whether :func:`gelu_mlp` computes this forward pass: the
        activation is a GELU, dropout is off, and no compiler is tracing
        (compilers plan their own recomputation and fusion)."""
        return (isinstance(self.act, nn.GELU)
                and not (self.training and self.drop.p > 0)
                and not is_traced())


class TransformerLayer(nn.Module):
    """A pre-norm transformer layer: self-attention, then an MLP, each in a
    residual branch with stochastic depth.

    Args:
        embed_dims (int): Channels of the tokens.
        num_heads (int): Number of attention heads.
        mlp_ratio (float): Hidden channels of the MLP over ``embed_dims``.
            Defaults to 4.
        qkv_bias (bool): Whether the attention's query/key/value projection
            has a bias. Defaults to False.
        drop_rate (float): Dropout rate after the attention's output
            projection and the MLP's layers. Defaults to 0.
        attn_drop_rate (float): Dropout rate on attention weights.
            Defaults to 0.
        drop_path_rate (float): Stochastic depth rate of both branches.
            Defaults to 0.
        norm_cfg (dict): The normalization. Defaults to ``dict(type='LN')``.
        act_cfg (dict): The MLP's activation. Defaults to
            ``dict(type='GELU')``.

    Examples:
        >>> import torch
        >>> layer = TransformerLayer(embed_dims=64, num_heads=4)
        >>> layer(torch.rand(2, 10, 64)).shape
        torch.Size([2, 10, 64])
    """

    def __init__(self,
                 embed_dims,
                 num_heads,
                 mlp_ratio=4.,
                 qkv_bias=False,
                 drop_rate=0.,
                 attn_drop_rate=0.,
                 drop_path_rate=0.,
                 norm_cfg=dict(type='LN'),
                 act_cfg=dict(type='GELU')):
        super().__init__()
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.attn = MultiheadSelfAttention(
            embed_dims,
            num_heads,
            qkv_bias=qkv_bias,
            attn_drop=attn_drop_rate,
            proj_drop=drop_rate)
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.mlp = Mlp(
            embed_dims,
            int(embed_dims * mlp_ratio),
            act_cfg=act_cfg,
            drop=drop_rate)
        self.drop_path = DropPath(
            drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def forward(self, x):
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(x, norm=self.norm2))
