"""Zero-copy conversions between token sequences and feature maps: row-major
tokens (B, H*W, C) are a channels-last (B, C, H, W) map, which convolutions
take and answer in the same format."""


def tokens_to_map(tokens, hw_shape):
    """View tokens (B, H*W, C) on a grid ``hw_shape`` (H, W) as a
    channels-last feature map (B, C, H, W) sharing their memory.

    Examples:
        >>> import torch
        >>> x = torch.rand(2, 6, 4)
        >>> fmap = tokens_to_map(x, (2, 3))
        >>> fmap.shape, fmap.data_ptr() == x.data_ptr()
        (torch.Size([2, 4, 2, 3]), True)
    """
    B, N, C = tokens.shape
    H, W = hw_shape
    if N != H * W:
        raise ValueError(f'{N} tokens do not make a {H}x{W} grid.')
    return tokens.transpose(1, 2).view(B, C, H, W)


def map_to_tokens(fmap):
    """Flatten a feature map (B, C, H, W) into tokens (B, H*W, C), without
    a copy when ``fmap`` is channels-last.

    Examples:
        >>> import torch
        >>> x = torch.rand(2, 6, 4)
        >>> y = map_to_tokens(tokens_to_map(x, (2, 3)))
        >>> y.is_contiguous(), bool((x == y).all())
        (True, True)
    """
    return fmap.flatten(2).transpose(1, 2)
