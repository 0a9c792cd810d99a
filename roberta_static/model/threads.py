"""Thread budgets: the CPU side and torch's intra-op threads share the cores without fighting.

torch's intra-op pool spins while it waits; when it and the producer want more cores than there
are, both crawl. So a pass gives torch only the cores
its CPU side leaves free, and one thread when the model runs on a GPU. Worker processes keep
their cores busy; the serial pass's producer thread mostly waits one chunk ahead, so there torch
keeps every core (the cost: a tiny encoder, whose batches take less time than producing them,
runs slower than it would with one thread).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def auto_workers(device_type: str) -> int:
    """Worker processes for ``workers="auto"``: the spare cores beside a CUDA encoder, else 1.

    A GPU encoder needs one core (its thread in the main process); every other core can feed
    it. On a CPU the model needs every core, and one process is faster (see "Engines on a CPU"
    in docs/benchmarks/throughput.md); MPS is not measured, so it stays with one process too.
    """
    return max(1, usable_cores() - 1) if device_type == "cuda" else 1


@contextmanager
def torch_threads(model_on_cpu: bool, cores_taken: int) -> Iterator[int]:
    """Run the body with torch's intra-op threads set to the cores left, then restore them.

    Args:
        model_on_cpu: Whether an encoder computes on the CPU; if not, torch gets one thread.
        cores_taken: Cores the CPU side keeps busy (the producer thread, or worker processes).

    Never raises the count above what the caller had set.

    """
    import torch

    before = torch.get_num_threads()
    budget = max(1, usable_cores() - cores_taken) if model_on_cpu else 1
    torch.set_num_threads(min(before, budget))
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def use_threads(count: int) -> None:
    """Give torch's intra-op pool ``count`` threads for the rest of this process."""
    import torch

    torch.set_num_threads(count)
