"""The ``targets/`` folder of a vectors folder: sentence targets written and read back, checked.

::

    targets/
      vectors.npy   float32 [S, T]  the teacher's sentence vector of each sentence
      keys.npy      uint64 [S]      each sentence's sampling key (ascending, no two alike)
      indptr.npy    int64 [S + 1]   sentence i's entries are entries[indptr[i]:indptr[i + 1]]
      entries.npy   int64 [nnz]     rows of vocab.tsv occurring in the sentence, ascending
      counts.npy    int64 [nnz]     how often each of them occurs there
      meta.json     format, sentences, dim, limit, offered, sampling, pooling, entries,
                    vocabulary_sha256

Everything is ``np.save`` without pickle, and JSON. The folder is written inside the vectors
folder's staging folder, so it appears with the vectors or not at all. Numpy only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..errors import VectorsError
from ..formats.native import TARGETS_DIR
from .targets import SAMPLING, SentenceTargets, csr_problem

T = TypeVar("T")

FORMAT = "roberta-static sentence targets"
FORMAT_VERSION = 1
ARRAYS = {  # file stem -> dtype
    "vectors": np.float32,
    "keys": np.uint64,
    "indptr": np.int64,
    "entries": np.int64,
    "counts": np.int64,
}
META_FILE = "meta.json"
# How a user makes targets: the distill option that keeps them (named in errors).
MAKE_THEM = "distill with --sentence-targets N to keep them"


def has_targets(folder: str | Path) -> bool:
    """Whether the vectors folder ``folder`` holds a ``targets/`` folder."""
    return (Path(folder) / TARGETS_DIR).is_dir()


def write_targets(targets: SentenceTargets, folder: str | Path, words: Sequence[str]) -> Path:
    """Write ``targets/`` into ``folder`` (a vectors folder being written, or its staging).

    Args:
        targets: The sample, its entries numbered as the rows of ``words``
            (:meth:`~.targets.SentenceTargets.reindexed` renames a pass's vocabulary ids).
        folder: Where the folder goes.
        words: The vectors folder's entries, in row order: their number and a hash of them are
            recorded, so :func:`read_targets` refuses targets of other vectors.

    Returns:
        The ``targets`` folder.

    Raises:
        VectorsError: An entry is not a row of ``words``.

    Example:
        >>> write_targets(pass_targets.reindexed(rows), staging, vectors.words)  # doctest: +SKIP

    """
    entries = targets.entries
    if len(entries) and entries.max() >= len(words):
        raise VectorsError(
            f"sentence targets name entry row {int(entries.max())}, but the vectors have "
            f"{len(words):,} rows (rename the entries with reindexed() first)"
        )
    target = Path(folder) / TARGETS_DIR
    target.mkdir()
    for name, dtype in ARRAYS.items():
        array = np.ascontiguousarray(getattr(targets, name), dtype=dtype)
        np.save(target / f"{name}.npy", array, allow_pickle=False)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "sentences": len(targets),
        "dim": targets.dim,
        "limit": targets.limit,
        "offered": targets.offered,
        "sampling": SAMPLING,
        "pooling": targets.pooling,
        "entries": len(words),
        "vocabulary_sha256": vocabulary_hash(words),
    }
    (target / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return target


def read_targets(folder: str | Path, words: Sequence[str] | None = None) -> SentenceTargets:
    """Read the ``targets/`` of the vectors folder ``folder``, checking every array.

    Args:
        folder: The vectors folder.
        words: Its entries in row order: the targets must have been written for them.

    Raises:
        VectorsError: No targets there, a file missing or malformed, arrays that disagree, or
            targets written for other vectors (each a one-line message naming the file).

    """
    target = Path(folder) / TARGETS_DIR
    if not target.is_dir():
        raise VectorsError(f"{folder}: holds no sentence targets ({TARGETS_DIR}/); {MAKE_THEM}")
    meta = _read(target / META_FILE, lambda p: json.loads(p.read_text(encoding="utf-8")))
    _check_meta(target / META_FILE, meta, words)
    arrays = {
        name: _read(target / f"{name}.npy", lambda p: np.load(p, allow_pickle=False))
        for name in ARRAYS
    }
    _check_arrays(target, arrays, meta)
    return SentenceTargets.of_sorted(
        meta["limit"], meta.get("pooling"), meta.get("offered", meta["sentences"]), **arrays
    )


def vocabulary_hash(words: Sequence[str]) -> str:
    """SHA-256 of the entries, one per line: which vectors a set of targets was written for."""
    digest = hashlib.sha256()
    for word in words:
        digest.update(word.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _read(path: Path, read: Callable[[Path], T]) -> T:
    try:
        return read(path)
    except (OSError, ValueError) as error:
        raise VectorsError(f"{path}: cannot read it ({error})") from None


def _check_meta(path: Path, meta: Any, words: Sequence[str] | None) -> None:
    """Refuse a ``meta.json`` not ours, or written for vectors other than ``words``."""
    needed = ("sentences", "dim", "limit", "entries", "vocabulary_sha256")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise VectorsError(f"{path}: not the meta.json of sentence targets")
    missing = [key for key in needed if key not in meta]
    if missing:
        raise VectorsError(f"{path}: lacks {', '.join(missing)}")
    if meta.get("format_version") != FORMAT_VERSION:
        raise VectorsError(
            f"{path}: format version {meta.get('format_version')}, this roberta-static reads "
            f"{FORMAT_VERSION}"
        )
    if words is not None and (
        meta["entries"] != len(words) or meta["vocabulary_sha256"] != vocabulary_hash(words)
    ):
        raise VectorsError(
            f"{path}: the targets were written for other vectors ({meta['entries']:,} entries, "
            f"not these {len(words):,}, or in another order); their entries would not match"
        )


def _check_arrays(folder: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """Refuse arrays of the wrong type or shape, or that disagree with each other or the meta."""
    for name, dtype in ARRAYS.items():
        if arrays[name].dtype != dtype:
            raise VectorsError(
                f"{folder / name}.npy: expected {np.dtype(dtype).name}, found {arrays[name].dtype}"
            )
    problem = _shape_problem(arrays, meta) or csr_problem(
        meta["sentences"], arrays["indptr"], arrays["entries"], arrays["counts"]
    )
    if problem:
        raise VectorsError(f"{folder}: {problem}")


def _shape_problem(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> str:
    """What is wrong with the keys, vectors and entry rows, or an empty string."""
    sentences, dim = meta["sentences"], meta["dim"]
    keys, vectors, entries = arrays["keys"], arrays["vectors"], arrays["entries"]
    if keys.shape != (sentences,):
        return f"{sentences:,} sentences need {sentences:,} keys, found {keys.shape}"
    if vectors.shape != (sentences, dim):
        return f"vectors.npy is {vectors.shape}, expected ({sentences}, {dim})"
    if np.any(keys[1:] <= keys[:-1]):
        return "keys.npy must be ascending with no key twice"
    if len(entries) and entries.max() >= meta["entries"]:
        return f"entries.npy names row {int(entries.max())} of {meta['entries']:,}"
    if not np.isfinite(vectors).all():
        bad = int((~np.isfinite(vectors)).any(axis=1).sum())
        return f"{bad:,} of {sentences:,} sentence vectors hold NaN or Inf"
    return ""
