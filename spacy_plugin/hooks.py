"""``doc_vector = "weighted"``: the weighted exports' document vectors as spaCy ``user_hooks``.

A Doc's or Span's ``vector`` (and so ``similarity``, ``vector_norm``) becomes what the model2vec
and sentence-transformers exports give for the same words with ``--remove-top-pcs`` and
``--sif-coefficient`` (:class:`~roberta_static.vectors.docvectors.DocWeighting`). Token vectors
stay the plain ones in ``nlp.vocab.vectors``: the hooks map a text's rows when asked. The weighting
is found when the component loads vectors and is saved with it (msgpack, no pickle).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import srsly
from spacy.attrs import IDS
from spacy.lexeme import Lexeme
from spacy.strings import StringStore
from spacy.tokens import Doc, Span, Token
from spacy.vectors import Vectors

from roberta_static.vectors.data import VectorData
from roberta_static.vectors.docvectors import DocWeighting

from .tables import VectorSource

Unit = Doc | Span | Token | Lexeme


class WeightedDocVectors:
    """The weighting of the vectors a component loaded, keyed by their spaCy lookup keys.

    Args:
        keys: The lookup key (``strings.add(word)``) of each weighted entry.
        weighting: Mean, components and weights, one weight per key.
        attr: ``LOWER`` or ``ORTH``: the token attribute the keys are of.

    """

    def __init__(self, keys: np.ndarray, weighting: DocWeighting, attr: str) -> None:
        self.keys = np.asarray(keys, dtype=np.uint64)
        self.weighting = weighting
        self.attr = attr
        # Later entries win, as in the vectors table (build_table adds them in order).
        weight = dict(zip(self.keys.tolist(), weighting.weights.tolist(), strict=True))
        # Sorted, so a text's keys are looked up at once (np.searchsorted), not one by one.
        self._sorted_keys = np.array(sorted(weight), dtype=np.uint64)
        self._sorted_weights = np.array([weight[key] for key in self._sorted_keys.tolist()])

    @classmethod
    def fit(
        cls, strings: StringStore, source: VectorSource, remove_top_pcs: int, sif_coefficient: float
    ) -> WeightedDocVectors:
        """The weighting of ``source``'s vectors and counts (its learned weights, if tuned)."""
        vectors = VectorData(
            source.words, source.matrix, source.counts, weights=source.weights, offset=source.offset
        )
        weighting = DocWeighting.fit(vectors, remove_top_pcs, sif_coefficient)
        keys = np.array([strings.add(word) for word in source.words], dtype=np.uint64)
        return cls(keys, weighting, source.attr)

    def install(self, doc: Doc) -> None:
        """Set ``doc``'s hooks: its and its spans' ``vector`` and ``similarity`` are weighted."""
        for hooks in (doc.user_hooks, doc.user_span_hooks):
            hooks["vector"] = self.vector
            hooks["similarity"] = self.similarity

    def vector(self, unit: Unit) -> np.ndarray:
        """The weighted vector of a Doc, Span, Token or Lexeme (zeros when no word is weighted)."""
        keys = unit_keys(unit, self.attr)
        place = np.searchsorted(self._sorted_keys, keys)
        weighted = place < len(self._sorted_keys)
        weighted[weighted] = self._sorted_keys[place[weighted]] == keys[weighted]
        keys, weights = keys[weighted], self._sorted_weights[place[weighted]]
        table: Vectors = unit.vocab.vectors
        rows = np.asarray(table.find(keys=keys))
        present = rows >= 0  # a weighted word missing from a table changed since
        return self.weighting.text_vector(table.data[rows[present]], weights[present])

    def similarity(self, unit: Unit, other: Any) -> float:
        """Cosine of the weighted vectors (of ``other`` too); 0 when either is zero."""
        first = self.vector(unit)
        second = self.vector(other) if isinstance(other, Unit) else other.vector
        norms = float(np.linalg.norm(first) * np.linalg.norm(second))
        return float(first @ second) / norms if norms else 0.0

    def to_bytes(self) -> bytes:
        """Serialise the keys and the weighting (msgpack: plain arrays, no pickle)."""
        weighting = self.weighting
        return srsly.msgpack_dumps(
            {
                "attr": self.attr,
                "keys": self.keys,
                "mean": weighting.mean,
                "axes": weighting.axes,
                "weights": weighting.weights,
                "offset": weighting.offset,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> WeightedDocVectors:
        """Read what :meth:`to_bytes` wrote."""
        parts = srsly.msgpack_loads(data)
        # Pipelines saved before tuned vectors had an offset have none: zero.
        offset = parts.get("offset")
        weighting = DocWeighting(parts["mean"], parts["axes"], parts["weights"], offset)
        return cls(parts["keys"], weighting, parts["attr"])


def install_mean(doc: Doc) -> None:
    """Set ``doc``'s hooks for ``doc_vector = "mean"``: its and its spans' ``vector``."""
    for hooks in (doc.user_hooks, doc.user_span_hooks):
        hooks["vector"] = mean_vector


def mean_vector(unit: Doc | Span) -> np.ndarray:
    """The unit's average token vector as spaCy computes it, read in a few array operations.

    Every token's vector over all the tokens (zeros for a token without one), keyed by the
    table's attribute as spaCy keys them, without the Python object and vector copy per token
    that spaCy's average makes.
    """
    table: Vectors = unit.vocab.vectors
    keys = unit.to_array([table.attr]).reshape(-1).astype(np.uint64)
    if not len(keys):
        return np.zeros(table.shape[1], dtype=np.float32)
    rows = np.asarray(table.find(keys=keys))
    return (table.data[rows[rows >= 0]].sum(axis=0) / len(keys)).astype(np.float32)


def unit_keys(unit: Unit, attr: str) -> np.ndarray:
    """The lookup keys (``LOWER`` or ``ORTH``) of the unit's tokens, read in one call."""
    if isinstance(unit, Token | Lexeme):
        return np.array([getattr(unit, attr.lower())], dtype=np.uint64)
    return unit.to_array([IDS[attr]]).reshape(-1).astype(np.uint64)
