"""How glibc's ``malloc`` (PyTorch's CPU allocator) handles freed memory:
by default it unmaps large freed blocks, so every training step has the
kernel map and zero-fill fresh pages for its activations.
"""
import ctypes
import functools

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


@functools.lru_cache(maxsize=None)
def _glibc():
    """glibc's ``libc``, or None where the C library is another one."""
    try:
        libc = ctypes.CDLL('libc.so.6')
        libc.gnu_get_libc_version  # only glibc has it
    except (OSError, AttributeError):
        return None
    return libc


def _mallopt(settings):
    libc = _glibc()
    if libc is None:
        return False
    return all(libc.mallopt(param, value) == 1 for param, value in settings)


def keep_freed_memory(mmap_threshold=2**30, trim_threshold=2**31 - 1):
    """Make glibc's ``malloc`` keep freed memory for reuse, without page
    faults. Child processes (data loader workers) inherit the setting.

    Args:
        mmap_threshold (int): Larger blocks are mapped afresh. Default: 1 GiB.
        trim_threshold (int): Free bytes kept at the top of the heap.
            Defaults to the largest ``mallopt`` takes (2 GiB).

    Returns:
        bool: Whether ``malloc`` could be set (not on other C libraries).

    Examples:
        >>> keep_freed_memory()  # on glibc
        True
    """
    return _mallopt([(M_MMAP_THRESHOLD, mmap_threshold),
                     (M_TRIM_THRESHOLD, trim_threshold)])


def release_freed_memory():
    """Make glibc's ``malloc`` give freed blocks back to the kernel at once.

    Returns:
        bool: Whether ``malloc`` could be set (not on other C libraries).

    Examples:
        >>> release_freed_memory()  # on glibc
        True
    """
    if not _mallopt([(M_MMAP_THRESHOLD, 64 * 1024),
                     (M_TRIM_THRESHOLD, 1024 * 1024)]):
        return False
    _glibc().malloc_trim(0)
    return True
