"""Sentence targets: the teacher's vector of up to N sentences, and the entries each one holds.

``tune`` learns from them (:mod:`roberta_static.tuning`); a vectors folder keeps them in
``targets/`` (:mod:`.target_files`).

The sample is the ``limit`` sentences whose texts have the smallest keys, a key being the first 8
bytes of the text's BLAKE2b hash (a bottom-k sample): which sentences it holds depends on the
texts alone, not on how the corpus was cut into shards, in which order the parts were read, or
which engine read them. Two samples merge into the sample of both inputs by keeping the bottom
``limit`` keys of the union; a text met twice (the same key) is kept once, as first met.

A :class:`SentenceTargets` is a value of a pass's state: sentences are offered to it batch by
batch (:meth:`SentenceTargets.add`), and the parts of a pass merge (:meth:`SentenceTargets.merge`)
into what one process would have kept. Numpy only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError

SAMPLING = (
    "bottom-k: the sentences whose UTF-8 texts have the smallest 64-bit BLAKE2b keys; "
    "identical texts once"
)
_KEY_BYTES = 8


def sentence_key(text: str) -> int:
    """The sampling key of a sentence: the first 8 bytes of BLAKE2b of its UTF-8 text.

    The same in every process and on every machine (unlike Python's ``hash``).

    Example:
        >>> sentence_key("The cat sat.") == sentence_key("The cat sat.")
        True

    """
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=_KEY_BYTES).digest()
    return int.from_bytes(digest, "little")


def sentence_keys(texts: Sequence[str]) -> np.ndarray:
    """The keys of ``texts`` as a ``uint64`` array."""
    return np.fromiter((sentence_key(text) for text in texts), np.uint64, len(texts))


def empty_like(targets: SentenceTargets | None) -> SentenceTargets | None:
    """An empty sample with the limit, width and pooling of ``targets`` (None for None)."""
    if targets is None:
        return None
    return SentenceTargets(targets.limit, targets.dim, targets.pooling)


class SentenceTargets:
    """A bottom-k sample of sentences: their keys, teacher vectors and entries with counts.

    Args:
        limit: The most sentences kept.
        dim: Width of the teacher's sentence vectors.
        pooling: How the teacher pooled them (written into ``meta.json``; two samples merge
            only when theirs agree).

    Sentences are offered with :meth:`add`; those whose key is not among the ``limit`` smallest
    seen so far drop out. Offered sentences wait in a buffer and are sorted in when it is as
    large as half the sample, so each offer costs a constant share of a sort.

    Example:
        >>> sample = SentenceTargets(limit=2, dim=1)
        >>> keys = np.array([30, 10, 20], dtype=np.uint64)
        >>> sample.add(keys, np.ones((3, 1)), np.array([0, 1, 2, 3]), np.array([5, 6, 7]))
        >>> sample.keys.tolist(), sample.entries.tolist(), sample.offered
        ([10, 20], [6, 7], 3)

    """

    def __init__(self, limit: int, dim: int, pooling: dict[str, Any] | None = None) -> None:
        if limit < 1:
            raise ConfigError(f"must be >= 1, got {limit}", field="sentence_targets")
        self.limit = limit
        self.dim = dim
        self.pooling = dict(pooling or {})
        self.offered = 0
        self._kept = _Block.empty(dim)
        self._waiting: list[_Block] = []
        self._waiting_count = 0

    def __len__(self) -> int:
        return len(self._sorted().keys)

    def __repr__(self) -> str:
        return f"SentenceTargets<{len(self):,} of limit {self.limit:,}, dim {self.dim}>"

    @property
    def keys(self) -> np.ndarray:
        """``uint64 [S]``: each kept sentence's key, ascending."""
        return self._sorted().keys

    @property
    def vectors(self) -> np.ndarray:
        """``float32 [S, dim]``: the teacher's vector of each kept sentence."""
        return self._sorted().vectors

    @property
    def indptr(self) -> np.ndarray:
        """``int64 [S + 1]``: sentence ``i``'s entries are ``entries[indptr[i]:indptr[i + 1]]``."""
        return self._sorted().indptr

    @property
    def entries(self) -> np.ndarray:
        """``int64 [nnz]``: the entries occurring in each kept sentence."""
        return self._sorted().entries

    @property
    def counts(self) -> np.ndarray:
        """``int64 [nnz]``: how often each entry occurs in its sentence."""
        return self._sorted().counts

    def wanted(self, keys: np.ndarray) -> np.ndarray:
        """Which of ``keys`` could still enter the sample (the rest would drop out at once).

        A pass may skip computing the teacher's vector for the others.
        """
        kept = self._kept
        if len(kept.keys) < self.limit:
            return np.ones(len(keys), dtype=bool)
        return np.asarray(keys, dtype=np.uint64) < kept.keys[-1]

    def add(
        self,
        keys: np.ndarray,
        vectors: np.ndarray,
        indptr: np.ndarray,
        entries: np.ndarray,
        counts: np.ndarray,
    ) -> None:
        """Offer a batch of sentences, in the order met.

        Args:
            keys: ``[B]`` their keys (:func:`sentence_keys`).
            vectors: ``[B, dim]`` the teacher's vector of each.
            indptr: ``[B + 1]`` where each sentence's entries start in ``entries``.
            entries: The vocabulary entries occurring in each sentence (any order; an entry may
                repeat, its counts then add up).
            counts: How often each occurs.

        Raises:
            ConfigError: The arrays do not fit together.

        """
        block = _Block.of(keys, vectors, indptr, entries, counts, self.dim)
        self.offered += len(block.keys)
        wanted = self.wanted(block.keys)
        if not wanted.any():
            return
        self._waiting.append(block.select(np.flatnonzero(wanted)))
        self._waiting_count += int(wanted.sum())
        if self._waiting_count >= max(self.limit // 2, 256):
            self._sorted()

    def merge(self, later: SentenceTargets) -> SentenceTargets:
        """The sample of this part of a pass followed by ``later``: bottom ``limit`` of both.

        A sentence in both (the same key) keeps this part's vector and entries.

        Raises:
            ConfigError: The two differ in limit, width or teacher pooling.

        """
        for name in ("limit", "dim", "pooling"):
            if getattr(self, name) != getattr(later, name):
                raise ConfigError(
                    f"sentence targets of different {name} cannot merge: "
                    f"{getattr(self, name)} and {getattr(later, name)}"
                )
        merged = SentenceTargets(self.limit, self.dim, self.pooling)
        merged._kept = _bottom(self.limit, [self._sorted(), later._sorted()])
        merged.offered = self.offered + later.offered
        return merged

    def reindexed(self, rows: np.ndarray) -> SentenceTargets:
        """The same sample with entry ``e`` renamed ``rows[e]``; entries mapped to -1 go.

        A pass numbers entries as its vocabulary does; the vectors folder keeps only the entries
        found (and fills), so entries are renamed to the folder's rows before writing.
        """
        kept = self._sorted()
        rows = np.asarray(rows, dtype=np.int64)
        renamed = rows[kept.entries]
        keep = renamed >= 0
        sentence = np.repeat(np.arange(len(kept.keys)), np.diff(kept.indptr))[keep]
        indptr = np.searchsorted(sentence, np.arange(len(kept.keys) + 1))
        result = SentenceTargets(self.limit, self.dim, self.pooling)
        result._kept = _Block(
            kept.keys, kept.vectors, indptr, renamed[keep], kept.counts[keep]
        ).normalized()
        result.offered = self.offered
        return result

    @classmethod
    def of_sorted(
        cls,
        limit: int,
        pooling: dict[str, Any] | None,
        offered: int,
        keys: np.ndarray,
        vectors: np.ndarray,
        indptr: np.ndarray,
        entries: np.ndarray,
        counts: np.ndarray,
    ) -> SentenceTargets:
        """A sample from its arrays as :mod:`.target_files` or a checkpoint keeps them.

        ``keys`` must be ascending with no key twice, at most ``limit`` of them, and each
        sentence's entries ascending (as the properties of a sample give them).
        """
        sample = cls(limit, vectors.shape[1], pooling)
        sample._kept = _Block(keys, vectors, indptr, entries, counts)
        sample.offered = offered
        return sample

    def sentence(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """The entries of kept sentence ``index`` and their counts."""
        kept = self._sorted()
        span = slice(kept.indptr[index], kept.indptr[index + 1])
        return kept.entries[span], kept.counts[span]

    def _sorted(self) -> _Block:
        """The kept sentences, with the waiting ones sorted in."""
        if self._waiting:
            self._kept = _bottom(self.limit, [self._kept, *self._waiting])
            self._waiting, self._waiting_count = [], 0
        return self._kept


class _Block:
    """Sentences as arrays: keys, vectors, and their entries and counts in CSR form."""

    def __init__(
        self,
        keys: np.ndarray,
        vectors: np.ndarray,
        indptr: np.ndarray,
        entries: np.ndarray,
        counts: np.ndarray,
    ) -> None:
        self.keys = keys
        self.vectors = vectors
        self.indptr = indptr
        self.entries = entries
        self.counts = counts

    @classmethod
    def empty(cls, dim: int) -> _Block:
        none = np.zeros(0, dtype=np.int64)
        keys, vectors = np.zeros(0, np.uint64), np.zeros((0, dim), np.float32)
        return cls(keys, vectors, np.zeros(1, np.int64), none, none)

    @classmethod
    def of(
        cls,
        keys: np.ndarray,
        vectors: np.ndarray,
        indptr: np.ndarray,
        entries: np.ndarray,
        counts: np.ndarray,
        dim: int,
    ) -> _Block:
        """A batch as given to :meth:`SentenceTargets.add`, checked and normalised."""
        keys = np.asarray(keys, dtype=np.uint64)
        vectors = np.asarray(vectors, dtype=np.float32)
        indptr = np.asarray(indptr, dtype=np.int64)
        entries = np.asarray(entries, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        problem = csr_problem(len(keys), indptr, entries, counts)
        if vectors.shape != (len(keys), dim):
            problem = f"{len(keys)} keys need [{len(keys)}, {dim}] vectors, got {vectors.shape}"
        if problem:
            raise ConfigError(f"sentence targets: {problem}")
        return cls(keys, vectors, indptr, entries, counts).normalized()

    def normalized(self) -> _Block:
        """Each sentence's entries ascending, a repeated entry once with its counts added."""
        sentence = np.repeat(np.arange(len(self.keys)), np.diff(self.indptr))
        order = np.lexsort((self.entries, sentence))
        sentence, entries, counts = sentence[order], self.entries[order], self.counts[order]
        starts = np.ones(len(entries), dtype=bool)
        starts[1:] = (sentence[1:] != sentence[:-1]) | (entries[1:] != entries[:-1])
        firsts = np.flatnonzero(starts)
        summed = np.add.reduceat(counts, firsts) if len(firsts) else counts[:0]
        indptr = np.searchsorted(sentence[firsts], np.arange(len(self.keys) + 1))
        return _Block(self.keys, self.vectors, indptr, entries[firsts], summed)

    def select(self, rows: np.ndarray, with_vectors: bool = True) -> _Block:
        """The sentences ``rows``, in that order (without their vectors: an empty matrix)."""
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        lengths = ends - starts
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        spans = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1])
        vectors = self.vectors[rows] if with_vectors else self.vectors[:0]
        return _Block(self.keys[rows], vectors, indptr, self.entries[spans], self.counts[spans])


def _bottom(limit: int, blocks: list[_Block]) -> _Block:
    """The ``limit`` smallest keys of ``blocks``, ascending; a key met again keeps its first."""
    keys = np.concatenate([block.keys for block in blocks])
    order = np.argsort(keys, kind="stable")  # ties keep the order met
    first = np.ones(len(order), dtype=bool)
    first[1:] = keys[order][1:] != keys[order][:-1]
    chosen = order[first][:limit]
    # The vectors are gathered block by block: joining them all first would copy every one.
    sizes = [len(block.keys) for block in blocks]
    owner = np.repeat(np.arange(len(blocks)), sizes)[chosen]
    local = chosen - np.cumsum([0, *sizes[:-1]])[owner]
    vectors = np.empty((len(chosen), blocks[0].vectors.shape[1]), dtype=np.float32)
    for number, block in enumerate(blocks):
        mine = owner == number
        vectors[mine] = block.vectors[local[mine]]
    entry_starts = np.cumsum([0, *(len(block.entries) for block in blocks[:-1])])
    joined = _Block(
        keys,
        vectors[:0],  # gathered above: only the CSR part is selected here
        np.concatenate(
            [[0], *(block.indptr[1:] + at for block, at in zip(blocks, entry_starts, strict=True))]
        ).astype(np.int64),
        np.concatenate([block.entries for block in blocks]),
        np.concatenate([block.counts for block in blocks]),
    )
    csr = joined.select(chosen, with_vectors=False)
    return _Block(csr.keys, vectors, csr.indptr, csr.entries, csr.counts)


def csr_problem(sentences: int, indptr: np.ndarray, entries: np.ndarray, counts: np.ndarray) -> str:
    """What is wrong with CSR arrays of ``sentences`` rows, or an empty string."""
    if indptr.shape != (sentences + 1,) or indptr[0] != 0:
        return f"indptr must be [{sentences + 1}] values from 0, got shape {indptr.shape}"
    if np.any(np.diff(indptr) < 0) or indptr[-1] != len(entries):
        return f"indptr must rise to the {len(entries)} entries"
    if counts.shape != entries.shape:
        return f"{len(entries)} entries need {len(entries)} counts, got {counts.shape}"
    if len(entries) and (entries.min() < 0 or counts.min() < 1):
        return "entries must be >= 0 and counts >= 1"
    return ""
