"""A worker process for tests: :func:`~roberta_static.engine.worker.worker_main`, then whether it
imported torch.

It imports nothing but the worker module, so a process spawned to run :func:`probe` starts as the
local engine's workers do.
"""

from __future__ import annotations

import sys
from typing import Any

from roberta_static.engine.worker import worker_main


def probe(setups: Any, tasks: Any, results: Any, without_torch: bool) -> None:
    """Serve the tasks as a worker does, then send ``("torch", -1, imported)``."""
    worker_main(setups, tasks, results, without_torch)
    results.put(("torch", -1, sys.modules.get("torch") is not None))
