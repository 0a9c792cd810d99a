"""gensim's view of static vectors: `KeyedVectors` with counts set, from plain arrays.

A leaf (numpy and gensim only): :meth:`StaticVectors.to_keyed_vectors
<roberta_static.vectors.static.StaticVectors.to_keyed_vectors>` orders the rows and calls it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gensim.models import KeyedVectors


def keyed_vectors(words: Sequence[str], vectors: np.ndarray, counts: np.ndarray) -> KeyedVectors:
    """``KeyedVectors`` of ``words`` in the order given, with ``count`` set for each key.

    Example:
        >>> kv = keyed_vectors(["b", "a"], np.eye(2, dtype=np.float32), np.array([5, 1]))
        >>> kv.index_to_key, int(kv.get_vecattr("b", "count"))
        (['b', 'a'], 5)

    """
    kv = KeyedVectors(vectors.shape[1], count=0, dtype=np.float32)
    kv.add_vectors(list(words), vectors)
    # Counts are set in bulk: add_vectors(extras=...) fails on a dict in gensim 4.4.
    kv.allocate_vecattrs(["count"], [np.int64])
    kv.expandos["count"][:] = counts
    return kv
