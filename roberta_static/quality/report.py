"""What a report on a vectors folder shows, gathered as plain data (the page: :mod:`.report_page`).

Only numpy is needed here; the page needs the ``[report]`` extra (plotly, jinja2).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, KeyNotFoundError, VectorsError, short_list
from ..vectors.static import StaticVectors
from .evaluate import PairScores, dataset_path, evaluate_pairs
from .sweep import CSV_FILE, sweep_folder_entries

MAP_POINTS = 3000
"""Most entries drawn on the 2-D map: every filled entry (up to half), then the most frequent."""
NEIGHBOURS = 8
_SPREAD = 3  # default words: this many frequent, middling and rare entries, and filled ones


@dataclass
class Neighbours:
    """The nearest entries of one word: ``(entry, cosine, count)``, best first."""

    word: str
    count: int
    nearest: list[tuple[str, float, int]]


@dataclass
class Map:
    """2-D coordinates of some entries, and how they were made (``pca`` or ``umap``)."""

    method: str
    words: list[str]
    xy: np.ndarray
    counts: np.ndarray


@dataclass
class ReportData:
    """Everything the report shows about one vectors folder."""

    folder: str
    meta: dict[str, Any]
    entries: int
    dim: int
    counts: np.ndarray
    filled: list[str]
    neighbours: list[Neighbours]
    map: Map
    sweep: list[dict[str, str]] | None = None
    scores: list[PairScores] = field(default_factory=list)
    layer_view: Any = None
    words_without_vectors: list[str] = field(default_factory=list)


def gather(
    folder: str | os.PathLike,
    words: Sequence[str] | None = None,
    datasets: Sequence[str] = (),
    sweep: str | os.PathLike | None = None,
    umap: bool = True,
    allow_pickle: bool = False,
) -> ReportData:
    """Read vectors and compute what the report shows.

    The inputs are read and checked before the map, the slow part (UMAP), is drawn.

    Args:
        folder: Vectors in any format ``StaticVectors.load`` reads: a folder written by
            ``distill`` (and ``sweep``, for the sweep's section), an export, a word2vec file.
        words: Words whose neighbours to list (default: a spread of frequent, rare and filled);
            those without a vector are left out and listed in ``words_without_vectors``.
        datasets: Word-pair datasets to score the vectors on (names or files).
        sweep: The folder ``sweep`` wrote its results into (default: ``folder``, if it holds them).
        umap: Draw the map with UMAP when ``umap-learn`` is installed (else PCA).
        allow_pickle: Read a ``.kv`` file, a pickle that can run code when loaded.

    Raises:
        ConfigError: ``words`` were given and none of them has a vector.

    """
    vectors = StaticVectors.load(folder, allow_pickle=allow_pickle)
    neighbours, without = neighbours_of_words(vectors, words or default_words(vectors))
    sweep_rows = read_sweep(Path(sweep if sweep is not None else folder), sweep is not None)
    scores = []
    if datasets:
        kv, lower = vectors.to_keyed_vectors(), vectors.case == "lower"
        named = map(dataset_path, datasets)
        scores = [evaluate_pairs(kv, path, lower, name) for name, path in named]
    return ReportData(
        folder=str(folder),
        meta=vectors.meta,
        entries=len(vectors),
        dim=vectors.dim,
        counts=vectors.counts,
        filled=[w for w, c in zip(vectors.words, vectors.counts, strict=True) if c == 0],
        neighbours=neighbours,
        map=project(vectors, umap),
        sweep=sweep_rows,
        scores=scores,
        words_without_vectors=without,
    )


def default_words(vectors: StaticVectors) -> list[str]:
    """A spread of entries: the most frequent, some in the middle, the rarest seen, some filled."""
    order = np.argsort(-vectors.counts, kind="stable")
    seen = order[vectors.counts[order] > 0]
    middle = len(seen) // 2 - _SPREAD // 2
    picks = [*seen[:_SPREAD], *seen[max(middle, 0) : middle + _SPREAD], *seen[-_SPREAD:]]
    picks += list(order[vectors.counts[order] == 0][:_SPREAD])
    return [vectors.words[i] for i in dict.fromkeys(picks)]


def neighbours_of(vectors: StaticVectors, word: str) -> Neighbours:
    """The :data:`NEIGHBOURS` nearest entries of ``word`` (raises ``KeyNotFoundError``)."""
    row = vectors.get_index(word)
    nearest = vectors.most_similar(word, topn=NEIGHBOURS)
    return Neighbours(
        vectors.words[row],
        int(vectors.counts[row]),
        [(w, round(c, 3), int(vectors.counts[vectors.get_index(w)])) for w, c in nearest],
    )


def neighbours_of_words(
    vectors: StaticVectors, words: Sequence[str]
) -> tuple[list[Neighbours], list[str]]:
    """The neighbours of each entry named in ``words`` (once each), and the words without a vector.

    Raises:
        ConfigError: None of ``words`` has a vector.

    """
    found: dict[str, Neighbours] = {}
    without = []
    for word in words:
        try:
            neighbours = neighbours_of(vectors, word)
        except KeyNotFoundError:
            without.append(word)
        else:
            found.setdefault(neighbours.word, neighbours)
    if words and not found:
        raise ConfigError(f"no vector for any word given: {short_list(without)}", field="words")
    return list(found.values()), without


def map_rows(counts: np.ndarray, limit: int = MAP_POINTS) -> np.ndarray:
    """Rows drawn on the map: filled entries (up to half the points), then the most frequent."""
    filled = np.flatnonzero(counts == 0)[: limit // 2]
    seen = np.flatnonzero(counts > 0)
    frequent = seen[np.argsort(-counts[seen], kind="stable")][: limit - len(filled)]
    return np.sort(np.concatenate([frequent, filled]))


def project(vectors: StaticVectors, umap: bool = True) -> Map:
    """2-D coordinates of the :func:`map_rows`: UMAP when installed and asked for, else PCA."""
    rows = map_rows(vectors.counts)
    x = np.asarray(vectors.vectors[rows], dtype=np.float64)
    method, xy = "pca", pca_2d(x)
    if umap and len(rows) > 15:  # UMAP needs more points than its neighbourhood
        try:
            from umap import UMAP
        except ImportError:
            pass
        else:
            method = "umap"
            xy = UMAP(n_components=2, metric="cosine", random_state=0).fit_transform(x)
    return Map(method, [vectors.words[i] for i in rows], np.asarray(xy), vectors.counts[rows])


def pca_2d(x: np.ndarray) -> np.ndarray:
    """The rows of ``x`` on their first two principal components (zeros past the rank)."""
    centered = x - x.mean(axis=0)
    u, s, _ = np.linalg.svd(centered, full_matrices=False)
    xy = np.zeros((len(x), 2))
    rank = min(2, len(s))
    xy[:, :rank] = u[:, :rank] * s[:rank]
    return xy


def read_sweep(folder: Path, required: bool = False) -> list[dict[str, str]] | None:
    """The rows of the ``sweep.csv`` that ``sweep`` wrote into ``folder``, if it did.

    Raises:
        VectorsError: ``required`` and ``folder`` holds no sweep results.

    """
    if sweep_folder_entries(folder) is None:
        if required:
            raise VectorsError(f"{folder}: holds no {CSV_FILE} written by roberta-static sweep")
        return None
    with open(folder / CSV_FILE, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))
