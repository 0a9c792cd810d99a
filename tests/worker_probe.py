"""Worker processes for tests: :func:`~roberta_static.engine.worker.worker_main`, then whether it
imported torch; :func:`~roberta_static.engine.worker.worker_process`, and whether its exit tore
the interpreter down.

It imports nothing but the worker module, so a process started to run :func:`probe` starts as the
local engine's workers do (with the engine's start method, see ``local._worker_context``).
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import sys
from pathlib import Path
from typing import Any

from roberta_static.engine.worker import serve, worker_main, worker_process


def probe(setups: Any, tasks: Any, results: Any, without_torch: bool) -> None:
    """Serve the tasks as a worker does, then send ``("torch", -1, imported)``,
    ``("preloaded", -1, whether spaCy was imported before the worker began)``,
    ``("frozen", -1, whether objects are left out of the garbage collector)`` and
    ``("mmap threshold fixed", -1, mmap_threshold_fixed())``."""
    preloaded = "spacy" in sys.modules
    worker_main(setups, tasks, results, without_torch)
    results.put(("torch", -1, sys.modules.get("torch") is not None))
    results.put(("preloaded", -1, preloaded))
    results.put(("frozen", -1, gc.get_freeze_count() > 0))
    results.put(("mmap threshold fixed", -1, mmap_threshold_fixed()))


def mmap_threshold_fixed() -> bool:
    """Whether this process's glibc maps an 8 MiB block right after a 16 MiB one was freed.

    Freeing a mapped 16 MiB block raises glibc's dynamic threshold past 8 MiB, so the next
    8 MiB block comes from the heap; with the threshold fixed at 128 KiB it is mapped. The
    block's own header says which (glibc's IS_MMAPPED bit of the size word before it), so
    another thread freeing a mapped block meanwhile (a queue's feeder) cannot change the answer.
    """
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(libc.malloc(16 << 20))
    block = libc.malloc(8 << 20)
    mapped = bool(ctypes.c_size_t.from_address(block - ctypes.sizeof(ctypes.c_size_t)).value & 2)
    libc.free(block)
    return mapped


def probe_exit(setups: Any, tasks: Any, results: Any, torn_down: Path) -> None:
    """A worker process's whole life; ``torn_down`` is created if its interpreter's exit runs."""
    atexit.register(torn_down.touch)
    worker_process(setups, tasks, results, without_torch=True)


class FailingProducer:
    """A producer with a bug: its first chunk fails with a ``ValueError``."""

    def chunks(self, state: Any) -> Any:
        raise ValueError("a bug in the CPU side")
        yield


def serve_failing(results: Any) -> None:
    """Serve one task with a :class:`FailingProducer`, as a worker process does."""
    from roberta_static.engine.messages import EncodeShard
    from roberta_static.engine.state import ShardState
    from roberta_static.text.corpus import START
    from roberta_static.text.shards import Shard

    task = EncodeShard(0, ShardState.fresh(Shard(START, START)))
    serve(FailingProducer(), task, results.put)  # type: ignore[arg-type]
