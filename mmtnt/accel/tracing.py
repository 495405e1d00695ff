"""Whether a tracer or compiler is recording the forward pass."""
import torch


def is_traced():
    """Whether ``torch.jit`` is tracing or scripting, or ``torch.compile``
    is compiling.

    mmtnt's CPU fast paths (fused oneDNN operators, explicit attention, the
    memory-saving MLP) step aside then, so that exporters and compilers see
    the plain layers, which compute the same function.

    Returns:
        bool: True under a tracer, scripter or compiler.

    Examples:
        >>> is_traced()
        False
    """
    return (torch.jit.is_tracing() or torch.jit.is_scripting()
            or torch.compiler.is_compiling())
