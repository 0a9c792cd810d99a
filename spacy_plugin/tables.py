"""Read distilled vectors and build spaCy ``Vectors`` tables from them in one go."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from spacy.attrs import IDS
from spacy.strings import StringStore
from spacy.vectors import Vectors

from roberta_static.errors import ConfigError, VectorsError
from roberta_static.vectors.static import StaticVectors

from .settings import CasePolicy


@dataclass
class VectorSource:
    """Words and their vectors, with the token attribute spaCy should look them up by.

    ``counts`` are the vectors' own (``None`` for rows taken from a spaCy table, which has none),
    and ``weights`` and ``offset`` the learned weighting of tuned vectors (``None`` for others).
    """

    words: list[str]
    matrix: np.ndarray
    attr: Literal["LOWER", "ORTH"]
    counts: np.ndarray | None = None
    weights: np.ndarray | None = None
    offset: np.ndarray | None = None


def read_vectors(
    path: str | os.PathLike, case: CasePolicy = "auto", allow_pickle: bool = False
) -> VectorSource:
    """Read vectors in any format ``StaticVectors.load`` reads (a ``.kv`` with ``allow_pickle``).

    With ``case="auto"`` the vectors' own case policy is used: a vectors folder's ``meta.json``
    (or the one a model2vec or sentence-transformers model card carries); otherwise lookups are by
    ``LOWER`` when every key is lower-case, else by ``ORTH``.
    """
    vectors = StaticVectors.load(path, allow_pickle=allow_pickle)
    if case == "auto":
        case = vectors.case
    return VectorSource(
        list(vectors.words),
        np.ascontiguousarray(vectors.vectors, dtype=np.float32),
        "LOWER" if case == "lower" else "ORTH",
        vectors.counts,
        vectors.weights,
        vectors.offset,
    )


def build_table(strings: StringStore, source: VectorSource, name: str | None = None) -> Vectors:
    """A ``Vectors`` table over ``strings`` holding every word of ``source``."""
    keys = [strings.add(word) for word in source.words]
    return Vectors(strings=strings, data=source.matrix, keys=keys, name=name, attr=source.attr)


def merged_table(current: Vectors, strings: StringStore, source: VectorSource) -> Vectors:
    """``current`` with the words of ``source`` added, or overwritten where they exist."""
    if current.shape[0] == 0 or current.n_keys == 0:
        return build_table(strings, source, current.name)
    if current.shape[1] != source.matrix.shape[1]:
        raise ConfigError(
            f"mode 'add': the pipeline's vectors have width {current.shape[1]}, "
            f"these {source.matrix.shape[1]}"
        )
    if current.attr != IDS[source.attr]:
        raise ConfigError(f"mode 'add': the pipeline's vectors are not looked up by {source.attr}")
    words = [strings[key] for key in current.key2row] + source.words
    matrix = np.concatenate([current.data[list(current.key2row.values())], source.matrix])
    # Later rows win: the new vectors overwrite the pipeline's for the same word.
    latest = {word: i for i, word in enumerate(words)}
    order = sorted(latest.values())
    merged = VectorSource([words[i] for i in order], matrix[order], source.attr)
    return build_table(strings, merged, current.name)


def with_attr(table: Vectors, attr: str) -> Vectors:
    """The same table, looked up by ``attr`` (``Vectors.attr`` cannot be set in place)."""
    rebuilt = Vectors(strings=table.strings, data=table.data, name=table.name, attr=attr)
    for key, row in table.key2row.items():
        rebuilt.add(key, row=row)
    return rebuilt


def uses_static_vectors(config: Any) -> bool:
    """Whether any component config asks for the pipeline's static vectors."""
    if isinstance(config, dict):
        if config.get("include_static_vectors") is True:
            return True
        if "StaticVectors" in str(config.get("@architectures", "")):
            return True
        return any(uses_static_vectors(value) for value in config.values())
    return False


def check_source(path: str | None, option: str = "vectors") -> Path:
    """The path of ``option``, which must exist."""
    if path is None or not Path(path).exists():
        raise VectorsError(f"roberta_static: {option}: no such folder or file: {path}")
    return Path(path)
