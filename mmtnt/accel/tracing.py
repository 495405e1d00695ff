"""Whether a tracer or compiler is recording the forward pass."""
import torch


def is_traced():
    """Whether ``torch.jit`` or ``torch.compile`` is recording: the CPU fast
    paths then step aside so that exporters and compilers see plain layers."""
    return (torch.jit.is_tracing() or torch.jit.is_scripting()
            or torch.compiler.is_compiling())
