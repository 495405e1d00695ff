import torch.nn as nn
from mmcv.cnn import build_activation_layer


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
