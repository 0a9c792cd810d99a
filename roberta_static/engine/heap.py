"""Hand the C heap's free pages back to the system now and then, in every process of a pass."""

from __future__ import annotations

import ctypes
import sys
import time
from collections.abc import Callable

TRIM_SECONDS = 10.0
"""At most one trim per process in this many seconds: a trim walks the whole heap."""

_malloc_trim: Callable[[int], int] | None = (
    getattr(ctypes.CDLL(None), "malloc_trim", None) if sys.platform.startswith("linux") else None
)  # glibc's; musl and other systems have none
_last_trim = time.monotonic()


def trim_heap() -> None:
    """Give glibc's free heap pages back to the system, unless done in the last TRIM_SECONDS.

    A pass allocates and frees buffers of ever-changing sizes from several threads (a batch of
    each shape, a chunk of each length), and glibc keeps the freed pages scattered between live
    ones: a process's resident memory grows with the text it reads while what it uses does not.
    ``malloc_trim`` returns them, as Dask's workers do for the same reason.
    """
    global _last_trim
    now = time.monotonic()
    if _malloc_trim is None or now - _last_trim < TRIM_SECONDS:
        return
    _last_trim = now
    _malloc_trim(0)
