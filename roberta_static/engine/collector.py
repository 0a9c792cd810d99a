"""Python's garbage collector during a pass: the loaded heap kept out of its full collections.

A loaded model, its tokenizer and spaCy's pipeline, with the libraries' own objects, are some
450,000 objects that every full collection walks (a quarter of a second each on the 2-core
machine) and never frees; the sentences and batches of a pass are allocated fast enough to set
one off every second or two. Frozen (``gc.freeze``, as vLLM and SGLang do once their models are
loaded), those objects are skipped; reference counting still frees everything, and a cycle made
during the pass is still collected. Nothing is collected first: a loaded model leaves a few
hundred objects of garbage, not worth a full collection.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loaded_heap_frozen() -> Iterator[None]:
    """Run the body with the objects alive now left out of the collector; then hand them back.

    A caller that has frozen objects itself, or turned the collector off, keeps its own
    arrangement: nothing is changed then.
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
