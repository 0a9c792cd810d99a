"""`VectorData`: words, their float32 vectors, counts and metadata; what every format holds.

A leaf (numpy only): the format modules (:mod:`roberta_static.formats`) read and write it, and
:class:`~roberta_static.vectors.static.StaticVectors` adds lookups and queries to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import VectorsError

if TYPE_CHECKING:
    from gensim.models import KeyedVectors

    from .targets import SentenceTargets


@dataclass
class VectorData:
    """Words and phrases with their vectors, counts and provenance.

    Attributes:
        words: One entry per row (phrases keep their inner spaces).
        vectors: ``float32`` matrix of shape ``[len(words), dim]``.
        counts: Occurrences averaged into each row (0 for a decontextualized fill).
        meta: Provenance written to ``meta.json``.
        weights: Each entry's weight in a text's vector, learned by ``tune`` (``None`` for
            vectors not tuned): a text's vector is the mean of its entries' ``weight * vector``,
            plus :attr:`offset`.
        offset: ``[dim]``, added to a tuned text's vector: the bias of ``tune``'s head (``None``
            for vectors not tuned, or tuned without it).
        targets: The sentence targets ``distill`` kept for ``tune``, their entries numbered as
            these rows; written into a vectors folder's ``targets/`` (read by ``tune``).

    """

    words: list[str]
    vectors: np.ndarray
    counts: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    weights: np.ndarray | None = None
    offset: np.ndarray | None = None
    targets: SentenceTargets | None = None

    def __post_init__(self) -> None:
        self.vectors = np.asarray(self.vectors, dtype=np.float32)
        self.counts = np.asarray(self.counts, dtype=np.int64)
        rows = len(self.words)
        if self.vectors.ndim != 2 or self.vectors.shape[0] != rows or self.counts.shape != (rows,):
            raise VectorsError(
                f"{rows} words need a [{rows}, D] matrix and {rows} counts; got "
                f"{list(self.vectors.shape)} and {list(self.counts.shape)}"
            )
        if self.weights is not None:
            self.weights = np.asarray(self.weights, dtype=np.float32)
            if self.weights.shape != (rows,):
                raise VectorsError(
                    f"{rows} words need {rows} weights; got {list(self.weights.shape)}"
                )
        if self.offset is not None:
            self.offset = np.asarray(self.offset, dtype=np.float32)
            dim = self.vectors.shape[1]
            if self.weights is None:
                raise VectorsError("an offset needs learned weights beside it; got none")
            if self.offset.shape != (dim,):
                raise VectorsError(
                    f"{dim} dimensions need {dim} offset values; got {list(self.offset.shape)}"
                )

    def weighted_vectors(self) -> np.ndarray:
        """Each row times its learned weight, plus the offset (the rows for vectors not tuned).

        A text's tuned vector is the mean of these rows over its entries.

        Example:
            >>> tuned = VectorData(["a"], [[1.0, 2.0]], [1], weights=[0.5], offset=[0.0, 1.0])
            >>> tuned.weighted_vectors().tolist()
            [[0.5, 2.0]]

        """
        if self.weights is None:
            return self.vectors
        weighted = self.vectors * self.weights[:, None]
        return weighted if self.offset is None else weighted + self.offset

    def __len__(self) -> int:
        return len(self.words)

    @property
    def case(self) -> str:
        """Case policy the vectors were distilled with: ``lower`` or ``keep``."""
        return self.meta.get("config", {}).get("case") or self._guessed_case

    @cached_property
    def _guessed_case(self) -> str:
        return guess_case(self.words)  # once: every lookup asks for the case policy

    @property
    def dim(self) -> int:
        """Width of each vector."""
        return int(self.vectors.shape[1])

    @cached_property
    def rows_by_count(self) -> np.ndarray:
        """Row numbers by descending count, ties in row order (the rows of ``to_keyed_vectors``)."""
        return np.argsort(-self.counts, kind="stable")

    def to_keyed_vectors(self, phrase_joiner: str | None = None) -> KeyedVectors:
        """Gensim ``KeyedVectors`` with counts, rows sorted by descending count.

        Sorting makes ``most_similar(restrict_vocab=N)`` search the N most frequent entries.
        ``phrase_joiner``, when given, replaces the spaces inside phrases (word2vec files split
        their lines on spaces).

        Example:
            >>> vecs = VectorData(["a", "b"], np.eye(2, dtype=np.float32), np.array([1, 5]))
            >>> kv = vecs.to_keyed_vectors()
            >>> kv.index_to_key, int(kv.get_vecattr("b", "count"))
            (['b', 'a'], 5)

        """
        from .keyed import keyed_vectors  # gensim loads only when asked for

        order = self.rows_by_count
        words = [self.words[i] for i in order]
        if phrase_joiner is not None:
            words = [phrase_joiner.join(word.split(" ")) for word in words]
        return keyed_vectors(words, self.vectors[order], self.counts[order])


def guess_case(words: list[str]) -> str:
    """``lower`` when no word has an upper-case letter (lookups may lower-case), else ``keep``."""
    return "lower" if all(word == word.lower() for word in words) else "keep"


def rank_counts(rows: int) -> np.ndarray:
    """Stand-in counts for a format that stores none: ``rows`` for the first row down to 1.

    gensim makes up the same for a word2vec file read without its counts: the rows keep their
    order when sorted by count, and no entry reads as a fill (count 0).

    Example:
        >>> rank_counts(3).tolist()
        [3, 2, 1]

    """
    return np.arange(rows, 0, -1, dtype=np.int64)
