"""Zero-copy conversions between token sequences and feature maps.

A sequence of tokens ``(B, H*W, C)`` stored row-major is, byte for byte, an
NHWC image. Viewing it as NCHW gives a tensor in PyTorch's channels-last
memory format, which convolutions accept directly (and answer in the same
format), so a transformer can hand its tokens to a convolution and take the
result back without copying either way.
"""


def tokens_to_map(tokens, hw_shape):
    """View tokens (B, H*W, C) as a feature map (B, C, H, W).

    The result shares memory with ``tokens`` and is channels-last, not
    contiguous: call ``.contiguous()`` for a plain NCHW copy.

    Args:
        tokens (Tensor): Row-major tokens of shape (B, H*W, C).
        hw_shape (tuple[int, int]): The grid (H, W).

    Returns:
        Tensor: Shape (B, C, H, W).

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
    """Flatten a feature map (B, C, H, W) into tokens (B, H*W, C).

    No copy is made when ``fmap`` is channels-last (as the output of a
    convolution fed by :func:`tokens_to_map` is); the result is then
    contiguous.

    Args:
        fmap (Tensor): Shape (B, C, H, W).

    Returns:
        Tensor: Shape (B, H*W, C).

    Examples:
        >>> import torch
        >>> x = torch.rand(2, 6, 4)
        >>> y = map_to_tokens(tokens_to_map(x, (2, 3)))
        >>> y.is_contiguous(), bool((x == y).all())
        (True, True)
    """
    return fmap.flatten(2).transpose(1, 2)
