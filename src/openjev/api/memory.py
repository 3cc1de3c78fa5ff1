"""Large buffers go back to the system when they are freed.

glibc serves an allocation of at least M_MMAP_THRESHOLD bytes with a mapping of its own, unmapped at
free. By default that threshold rises to the size of the largest such block freed (up to 32 MiB), and
from then on buffers of megabytes (request bodies, their decoded and split copies, images) come from
the heap and from the arenas of the worker threads, which keep the memory: after a burst of 20 image
bodies, resident memory stayed 248 MiB above its start (110 MiB with the fixed threshold alone). A
fixed threshold of 1 MiB (which also turns that rise off) keeps every such buffer on its own mapping,
returned at once, and two arenas (M_ARENA_MAX; the GIL serialises most allocations anyway) keep the
worker threads from each holding freed memory of their own. Nothing is changed where the C library is
not glibc.
"""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger("openjev")

#: glibc's `mallopt` parameter numbers (malloc.h).
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENAS = 2
#: Allocations of this size or more get a mapping of their own.
MMAP_THRESHOLD = 1024 * 1024


def return_large_buffers() -> bool:
    """Set glibc's mmap threshold and arena count (see the module docstring); False where that cannot be done."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_ARENA_MAX, ARENAS))
    if not done:
        log.warning("could not tune the C library's allocator: freed request buffers may stay resident")
    return done
