"""Whether a tracer or compiler is recording the forward pass."""
import torch


def is_traced():
    """Whether ``torch.jit`` is tracing or scripting, or ``torch.compile``
    is compiling: the CPU fast paths step aside then, so that exporters and
    compilers see the plain layers, which compute the same function.

    Examples:
        >>> is_traced()
        False
    """
    return (torch.jit.is_tracing() or torch.jit.is_scripting()
            or torch.compiler.is_compiling())
