"""What the fork server of the worker processes imports once, for every worker forked from it.

spaCy and the rest of the CPU side, with torch kept out of thinc (see :func:`.worker.worker_main`).
Kept out for this import only: each worker runs the user's main module first, which may import
torch.
"""

import sys

_blocked = sys.modules.setdefault("torch", None) is None  # type: ignore[arg-type]
try:
    from . import producer  # noqa: F401 (imported for the workers forked after this)
finally:
    if _blocked:
        del sys.modules["torch"]
