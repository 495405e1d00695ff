"""The transformer block every family is built from, and its MLP."""
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmcv.cnn.bricks import DropPath


class Mlp(nn.Module):
    """Two linear layers with an activation between them, as in timm's and
    mmpretrain's vision transformers.

    Args:
        in_dims (int): Input and output channels.
        hidden_dims (int): Channels between the two layers.
        act_cfg (dict): The activation. Defaults to ``dict(type='GELU')``.
        drop (float): Dropout rate after each layer. Defaults to 0.

    Examples:
        >>> import torch
        >>> mlp = Mlp(in_dims=32, hidden_dims=128)
        >>> mlp(torch.rand(2, 5, 32)).shape
        torch.Size([2, 5, 32])
    """

    def __init__(self, in_dims, hidden_dims, act_cfg=dict(type='GELU'),
                 drop=0.):
        super().__init__()
        self.fc1 = nn.Linear(in_dims, hidden_dims)
        self.act = build_activation_layer(act_cfg)
        self.fc2 = nn.Linear(hidden_dims, in_dims)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        """``fc2(act(fc1(x)))``, with dropout after each layer."""
        x = self.drop(self.act(self.fc1(x)))
        return self.drop(self.fc2(x))


def drop_path_rates(drop_path_rate, num_blocks):
    """Stochastic depth rising linearly from 0 at the first block to
    ``drop_path_rate`` at the last, as in timm and mmpretrain.

    Examples:
        >>> drop_path_rates(0.1, 3)
        [0.0, 0.05, 0.1]
    """
    return [
        drop_path_rate * i / max(num_blocks - 1, 1) for i in range(num_blocks)
    ]


class TransformerBlock(nn.Module):
    """A pre-norm transformer block: ``x + attn(norm1(x))``, then
    ``x + mlp(norm2(x))``, each branch with stochastic depth. The attention
    is given, so one block serves every family.

    Args:
        embed_dims (int): Channels of the tokens.
        attn (nn.Module): The attention, called as
            ``attn(x, hw_shape, attn_bias)``.
        mlp_ratio (float): MLP width over token width. Defaults to 4.
        drop_rate (float): Dropout after the MLP's layers. Defaults to 0.
        drop_path_rate (float): Stochastic depth rate. Defaults to 0.
        norm_cfg (dict): The two norms, built for ``embed_dims`` channels.
            Defaults to ``dict(type='LN')``.
        act_cfg (dict): The MLP's activation. Defaults to
            ``dict(type='GELU')``.

    Examples:
        >>> import torch
        >>> from mmtnt.models.layers import MultiheadAttention
        >>> block = TransformerBlock(64, MultiheadAttention(64, 4))
        >>> block(torch.rand(2, 10, 64)).shape
        torch.Size([2, 10, 64])
    """

    def __init__(self,
                 embed_dims,
                 attn,
                 mlp_ratio=4.,
                 drop_rate=0.,
                 drop_path_rate=0.,
                 norm_cfg=dict(type='LN'),
                 act_cfg=dict(type='GELU')):
        super().__init__()
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.attn = attn
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.mlp = Mlp(
            embed_dims,
            int(embed_dims * mlp_ratio),
            act_cfg=act_cfg,
            drop=drop_rate)
        self.drop_path = DropPath(
            drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def forward(self, x, hw_shape=None, attn_bias=None):
        """Tokens (B, N, C) -> (B, N, C); ``hw_shape`` and ``attn_bias`` go
        to the attention."""
        x = x + self.drop_path(
            self.attn(self.norm1(x), hw_shape, attn_bias))
        return x + self.drop_path(self.mlp(self.norm2(x)))
