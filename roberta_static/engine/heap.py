"""Keep the C heap of a pass's processes from growing with the text they read."""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Callable

TRIM_SECONDS = 10.0
"""At most one trim per process in this many seconds: a trim walks the whole heap."""

MMAP_THRESHOLD = 128 * 1024
"""glibc's own initial threshold, kept fixed in the processes that only read (see below)."""

_M_MMAP_THRESHOLD = -3  # mallopt's parameter number, from glibc's <malloc.h>
_libc = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
# glibc's; musl and other systems have neither
_malloc_trim: Callable[[int], int] | None = getattr(_libc, "malloc_trim", None)
_mallopt: Callable[[int, int], int] | None = getattr(_libc, "mallopt", None)
_last_trim = time.monotonic()


def trim_heap(now: bool = False) -> None:
    """Give glibc's free heap pages back to the system: ``now``, or unless done lately.

    Unless asked for ``now``, at most once in TRIM_SECONDS.

    A pass allocates and frees buffers of ever-changing sizes from several threads (a batch of
    each shape, a chunk of each length), and glibc keeps the freed pages scattered between live
    ones: a process's resident memory grows with the text it reads while what it uses does not.
    ``malloc_trim`` returns them, as Dask's workers do for the same reason. A caller that has
    just freed a large transient (a checkpoint's copy of the sums) trims ``now``: glibc keeps
    such a block's pages until a trim, and a periodic one may be seconds away.
    """
    global _last_trim
    clock = time.monotonic()
    if _malloc_trim is None or (not now and clock - _last_trim < TRIM_SECONDS):
        return
    _last_trim = clock
    _malloc_trim(0)


def fix_mmap_threshold() -> bool:
    """Keep glibc's mmap threshold at MMAP_THRESHOLD in this process; whether it was set.

    glibc raises the threshold to the largest block freed, after which the buffers of every
    size a reading process makes (a chunk of each length) come from the heap and leave holes in
    it that trimming cannot return. Fixed, they are mapped and unmapped whole. Only for a
    process that runs no model: there, each batch's activations would be mapped afresh and
    zeroed, which costs CPU time. A user's ``MALLOC_MMAP_THRESHOLD_`` is left to rule.
    """
    if _mallopt is None or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    return bool(_mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
