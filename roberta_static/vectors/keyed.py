"""gensim's view of static vectors: `KeyedVectors` with counts set."""

from __future__ import annotations

import numpy as np
from gensim.models import KeyedVectors

from ..vectors.static import StaticVectors


def to_keyed_vectors(vectors: StaticVectors, phrase_joiner: str | None = None) -> KeyedVectors:
    """Build ``KeyedVectors`` sorted by descending count, with ``count`` set for each key.

    Sorting makes ``most_similar(restrict_vocab=N)`` search the N most frequent entries.

    Example:
        >>> vecs = StaticVectors(["a", "b"], np.eye(2, dtype=np.float32), np.array([1, 5]))
        >>> kv = to_keyed_vectors(vecs)
        >>> kv.index_to_key, int(kv.get_vecattr("b", "count"))
        (['b', 'a'], 5)

    """
    order = vectors.rows_by_count
    words = [vectors.words[i] for i in order]
    if phrase_joiner is not None:
        words = [phrase_joiner.join(w.split(" ")) for w in words]
    kv = KeyedVectors(vectors.dim, count=0, dtype=np.float32)
    kv.add_vectors(words, vectors.vectors[order])
    # Counts are set in bulk: add_vectors(extras=...) fails on a dict in gensim 4.4.
    kv.allocate_vecattrs(["count"], [np.int64])
    kv.expandos["count"][:] = vectors.counts[order]
    return kv
