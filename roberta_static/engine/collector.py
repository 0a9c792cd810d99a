"""Python's garbage collector during a run: the loaded heap kept out of its full collections.

torch, transformers and spaCy, once imported, and a loaded model and pipeline are hundreds of
thousands of objects that every full collection walks and never frees. Loading a model allocates
enough to set off two or three of them, and the sentences and batches of a pass one every second
or two. Frozen (``gc.freeze``, as vLLM and SGLang do once their models are loaded), those objects
are skipped; reference counting still frees everything, and a cycle made meanwhile is still
collected. Nothing is collected first: a loaded model leaves a few hundred objects of garbage,
not worth a full collection.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def heap_frozen() -> Iterator[Callable[[], None]]:
    """Run the body with the objects alive now left out of the collector; then hand them back.

    Yields a function that leaves out the objects alive when it is called too (a model, once
    loaded). A caller that has frozen objects itself, or turned the collector off, keeps its
    own arrangement: nothing is changed then, and the function does nothing.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield lambda: None
        return
    gc.freeze()
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()
