"""`StaticVectors`: the distilled words, their float32 matrix, counts and provenance.

Only numpy is needed here (queries: :mod:`roberta_static.vectors.queries`). The vectors are saved
as a folder of three plain files (:mod:`roberta_static.formats.native`)::

    vectors.npy   float32 [V, D] (np.save, no pickle)
    vocab.tsv     word<TAB>count per row
    meta.json     format marker, config, model, corpus, stats

plus the exports written beside them on request; :meth:`StaticVectors.load` reads any of them
(:mod:`roberta_static.formats.exports`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from ..atomic import atomic_directory
from ..errors import ConfigError, KeyNotFoundError
from ..formats import exports, native
from .data import VectorData
from .merge import merge, merge_folders
from .queries import cosines, query_vector, top_rows, unit
from .target_files import write_targets

Key = str | np.ndarray
"""A word or phrase, or a vector of the same width."""


@dataclass
class StaticVectors(VectorData):
    """Static vectors of words and phrases: :class:`VectorData` with lookups and queries.

    Attributes:
        words: One entry per row (phrases keep their inner spaces).
        vectors: ``float32`` matrix of shape ``[len(words), dim]``.
        counts: Occurrences averaged into each row (0 for a decontextualized fill).
        meta: Provenance written to ``meta.json``.
        weights: Learned weights of the entries in a text's vector, for vectors ``tune`` made
            (``weights.npy`` beside the matrix); ``None`` otherwise.
        offset: Added to a tuned text's weighted mean (``offset.npy``); ``None`` otherwise.

    Lookups follow the case policy the vectors were distilled with (:attr:`case`): with ``lower``,
    ``"Paris"`` finds ``paris``. A phrase is found with single spaces or as ``new_york``, the
    word2vec spelling, whichever of the two the entries use. Queries answer as gensim's
    ``KeyedVectors`` does, without copying the matrix into one; vector lengths are computed on the
    first query, so replace ``vectors`` rather than editing it in place after querying. gensim's
    names ``index_to_key``, ``key_to_index`` and ``vector_size`` work too, and iterating gives the
    entries in row order.

    Rows keep the vocabulary's order (a vocabulary file's, or descending corpus frequency for one
    built from the corpus), not the order of :attr:`counts`; :meth:`to_keyed_vectors` sorts them.

    Example:
        >>> vecs = StaticVectors(["cat", "dog"], np.eye(2, dtype=np.float32), np.array([3, 1]))
        >>> vecs["Dog"].tolist(), vecs.dim, "CAT" in vecs
        ([0.0, 1.0], 2, True)

    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self._index = {word: i for i, word in enumerate(self.words)}

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._find(key) is not None

    def __iter__(self) -> Iterator[str]:
        """The entries in row order, as ``index_to_key``."""
        return iter(self.words)

    def __getitem__(self, keys: str | Sequence[str]) -> np.ndarray:
        """The vector of a key (read-only), or a ``[len(keys), dim]`` array for a list of keys."""
        if isinstance(keys, str) or not isinstance(keys, Iterable):
            return self.get_vector(keys)  # get_index explains why a number is not a key
        return np.vstack([self.get_vector(key) for key in keys])

    def __str__(self) -> str:
        return f"StaticVectors<{len(self)} words, dim {self.dim}>"

    @property
    def vector_size(self) -> int:
        """The width of each vector, as gensim names it (:attr:`dim`)."""
        return self.dim

    @property
    def index_to_key(self) -> list[str]:
        """The entry of each row, as gensim names it (:attr:`words`)."""
        return self.words

    @property
    def key_to_index(self) -> Mapping[str, int]:
        """The row of each entry spelled as in :attr:`words` (read-only).

        Only exact spellings: :meth:`get_index` also applies the case policy and reads ``_`` as a
        space.
        """
        return MappingProxyType(self._index)

    @cached_property
    def norms(self) -> np.ndarray:
        """Length of each row, computed once on first use."""
        return np.linalg.norm(self.vectors, axis=1)

    def get_index(self, key: str) -> int:
        """Row of a word or phrase under the case policy; :class:`KeyNotFoundError` if none."""
        if not isinstance(key, str):
            raise KeyNotFoundError(
                f"{key} is not a word or phrase (keys are strings; row i is .vectors[i], its "
                "entry .words[i])"
            )
        row = self._find(key)
        if row is None:
            policy = " (looked up lower-cased)" if self.case == "lower" else ""
            raise KeyNotFoundError(f"{key!r} has no vector{policy}")
        return row

    def get_vector(self, key: str, norm: bool = False) -> np.ndarray:
        """The vector of ``key``, unit-length with ``norm=True``; read-only, like gensim's.

        Raises:
            KeyNotFoundError: ``key`` has no vector (also a ``KeyError``).

        """
        row = self.get_index(key)
        vector = self.vectors[row] / self.norms[row] if norm else self.vectors[row]
        vector.setflags(write=False)
        return vector

    def most_similar(
        self,
        positive: Key | Sequence[Key | tuple[Key, float]] | None = None,
        negative: Key | Sequence[Key | tuple[Key, float]] | None = None,
        topn: int | None = 10,
        restrict_vocab: int | None = None,
    ) -> list[tuple[str, float]] | np.ndarray:
        """Entries nearest by cosine to the mean of ``positive`` minus ``negative``, as in gensim.

        Each key counts as its unit-length vector with weight 1 (-1 when negative), or the weight
        given in a ``(key, weight)`` pair; a raw vector counts as it is. Keys asked about are left
        out of the answer.

        Args:
            positive: A word, phrase or vector, or a list of them.
            negative: The same, pulling the other way (``king - man + woman``).
            topn: How many neighbours; ``None`` returns the cosine of every row.
            restrict_vocab: Search only this many entries, those with the highest counts (ties in
                row order). gensim searches its first N rows, which are these in the
                ``KeyedVectors`` of :meth:`to_keyed_vectors` (sorted by count): both give the same
                answer. Our rows are not sorted by count (see the class), so the first N rows
                would not be the most frequent entries. Needs a ``topn``.

        Returns:
            ``(entry, cosine)`` pairs, best first; or an array of cosines with ``topn=None``.

        Example:
            >>> vecs = StaticVectors(["a", "b", "c"], np.eye(3), np.ones(3))
            >>> [(word, round(cosine, 3)) for word, cosine in vecs.most_similar("a", topn=2)]
            [('b', 0.0), ('c', 0.0)]
            >>> query = np.array([2.0, 1.0, 0.0])
            >>> [(word, round(cosine, 3)) for word, cosine in vecs.most_similar(query, topn=2)]
            [('a', 0.894), ('b', 0.447)]

        """
        searched = self._most_frequent(restrict_vocab, topn)
        if topn is not None and topn < 1:
            return []
        terms = [*_weighted(positive, 1.0), *_weighted(negative, -1.0)]
        asked = {self.get_index(key) for key, _ in terms if isinstance(key, str)}
        query = query_vector([(self._as_vector(key), weight) for key, weight in terms])
        scores = cosines(self.vectors, self.norms, query)
        if topn is None:
            return scores
        best = top_rows(scores, topn, asked, searched)
        return [(self.words[row], float(scores[row])) for row in best]

    def similarity(self, first: Key, second: Key) -> float:
        """Cosine similarity of two words, phrases or vectors.

        Example:
            >>> vecs = StaticVectors(["a", "b"], np.array([[1.0, 0.0], [1.0, 1.0]]), np.ones(2))
            >>> round(vecs.similarity("a", "b"), 4)
            0.7071

        """
        return float(unit(self._as_vector(first)) @ unit(self._as_vector(second)))

    def _most_frequent(self, restrict_vocab: int | None, topn: int | None) -> np.ndarray | None:
        """The rows ``restrict_vocab`` lets :meth:`most_similar` search (None: all of them)."""
        if restrict_vocab is None:
            return None
        if topn is None:
            raise ConfigError(
                "needs a topn (with topn=None every row's cosine is returned)",
                field="restrict_vocab",
            )
        if restrict_vocab < 1:
            raise ConfigError(f"must be >= 1, got {restrict_vocab}", field="restrict_vocab")
        return self.rows_by_count[:restrict_vocab]

    def _as_vector(self, key: Key) -> np.ndarray:
        if isinstance(key, str):
            return self.get_vector(key, norm=True)
        if isinstance(key, np.ndarray) and key.shape == (self.dim,):
            return key
        raise ConfigError(f"expected a word, phrase or vector of width {self.dim}; got {key!r}")

    def _find(self, key: str) -> int | None:
        for spelling in self._spellings(key):
            row = self._index.get(spelling)
            if row is not None:
                return row
        return None

    def _spellings(self, key: str) -> Iterator[str]:
        """The key as given, normalised as the vocabulary was, and with ``_`` read as a space.

        Last with spaces as ``_``: the entries of a word2vec or sentence-encoder export.
        """
        yield key
        entry = " ".join(key.split())
        if self.case == "lower":
            entry = entry.lower()
        yield entry
        yield " ".join(entry.replace("_", " ").split())
        yield entry.replace(" ", "_")

    def merge(self, *others: VectorData) -> StaticVectors:
        """These vectors and ``others``, distilled over other texts, as one: count-weighted means.

        The vectors of each entry are averaged weighted by their counts, and counts summed, as
        if one run had read every input's text; see :func:`roberta_static.vectors.merge.merge`
        for what must match and how filled entries merge
        (:meth:`load_merged` merges folders, keeping their paths).

        Example:
            >>> march = StaticVectors.load("vectors-march")  # doctest: +SKIP
            >>> both = march.merge(StaticVectors.load("vectors-april"))  # doctest: +SKIP

        """
        data = merge([self, *others])
        return type(self)(data.words, data.vectors, data.counts, data.meta, targets=data.targets)

    @classmethod
    def load_merged(cls, folders: Sequence[str | os.PathLike]) -> StaticVectors:
        """Read the vectors folders ``distill`` wrote over different texts, merged into one.

        As :meth:`merge`, with each folder's path in the merged ``meta`` (see
        :func:`roberta_static.vectors.merge.merge_folders`).

        Example:
            >>> spring = StaticVectors.load_merged(["march", "april"])  # doctest: +SKIP
            >>> spring.save("vectors-spring")  # doctest: +SKIP

        """
        data = merge_folders(folders)
        return cls(data.words, data.vectors, data.counts, data.meta, targets=data.targets)

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> Path:
        """Write the folder atomically (:mod:`roberta_static.formats.native`).

        An existing non-empty folder is replaced only with ``overwrite=True``, and only when it is
        a vectors folder this package wrote, holding nothing else.
        """
        with atomic_directory(path, overwrite, [exports.vectors_folder_entries]) as staging:
            self.write_into(staging)
        return Path(path)

    def write_into(self, folder: Path) -> None:
        """Write the folder's files into an existing folder (used by ``save`` and the CLI)."""
        native.write(self, folder)
        if self.targets is not None:
            write_targets(self.targets, folder, self.words)

    @classmethod
    def load(
        cls, path: str | os.PathLike, mmap: bool = False, allow_pickle: bool = False
    ) -> StaticVectors:
        """Read vectors from any format this package writes, told apart by what is on disk.

        A vectors folder written by :meth:`save`, a gensim ``.kv``, a word2vec ``.bin`` or text
        file, a model2vec or a sentence-transformers folder (see
        :func:`roberta_static.formats.exports.read` for what each format keeps).

        Args:
            path: The folder or file.
            mmap: Leave a vectors folder's matrix on disk, read-only; pages load as they are used.
            allow_pickle: Read a ``.kv`` file, a pickle that can run code when loaded (only a file
                you trust). Nothing else is ever unpickled.

        Raises:
            ConfigError: A ``.kv`` file without ``allow_pickle`` (field ``allow_pickle``).
            VectorsError: ``path`` is none of these, or cannot be read.

        """
        data = exports.read(path, mmap=mmap, allow_pickle=allow_pickle)
        return cls(data.words, data.vectors, data.counts, data.meta, data.weights, data.offset)


def _weighted(keys: Any, weight: float) -> list[tuple[Key, float]]:
    """``keys`` as ``(key, weight)`` pairs: one key or vector, or a list of keys and pairs."""
    if keys is None:
        return []
    if isinstance(keys, str) or (isinstance(keys, np.ndarray) and keys.ndim == 1):
        return [(keys, weight)]
    return [key if isinstance(key, tuple) else (key, weight) for key in keys]
