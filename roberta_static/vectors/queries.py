"""Cosine-similarity queries on a matrix of row vectors, answered as gensim's ``KeyedVectors`` does.

Only numpy is needed. :class:`~.static.StaticVectors` turns words into rows and
vectors, and these functions do the arithmetic: a query is the weighted mean of unit-length word
vectors (a raw vector is taken as it is), and rows are ranked by their cosine with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError


def unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    length = np.linalg.norm(vector)
    return vector / length if length > 0 else vector


def query_vector(terms: Sequence[tuple[np.ndarray, float]]) -> np.ndarray:
    """Unit-length weighted mean of ``(vector, weight)`` terms, weights counted by magnitude.

    Example:
        >>> query_vector([(np.array([3.0, 0.0]), 1.0), (np.array([0.0, 1.0]), -1.0)]).round(3)
        array([ 0.949, -0.316], dtype=float32)

    """
    if not terms:
        raise ConfigError("positive, negative: give at least one key or vector")
    total = sum(weight * np.asarray(vector, dtype=np.float64) for vector, weight in terms)
    return unit(total / sum(abs(weight) for _, weight in terms)).astype(np.float32)


def cosines(matrix: np.ndarray, norms: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine of every row of ``matrix`` (lengths ``norms``) with a unit-length ``query``."""
    return (matrix @ query) / np.where(norms > 0, norms, 1)


def top_rows(
    scores: np.ndarray, topn: int, exclude: set[int], among: np.ndarray | None = None
) -> list[int]:
    """The ``topn`` highest-scoring rows (of ``among``, when given), best first, but ``exclude``.

    Example:
        >>> top_rows(np.array([0.9, 0.1, 0.5, 0.7]), 2, exclude={0}, among=np.array([0, 1, 2]))
        [2, 1]

    """
    rows = np.arange(len(scores)) if among is None else among
    count = min(topn + len(exclude), len(rows))
    if count == 0:
        return []
    best = rows[np.argpartition(-scores[rows], count - 1)[:count]]
    best = best[np.argsort(-scores[best], kind="stable")]
    return [int(row) for row in best if row not in exclude][:topn]
