"""The project's own format: a folder of three plain files, read without unpickling anything.

::

    vectors.npy   float32 [V, D] (np.save, no pickle)
    vocab.tsv     word<TAB>count per row
    meta.json     format marker, config, model, corpus, stats
    weights.npy   float32 [V], for vectors ``tune`` made: each entry's learned weight
    offset.npy    float32 [D], for vectors ``tune`` made: added to a text's weighted mean
    targets/      the teacher's sentence targets, when distill kept them (see
                  :mod:`~roberta_static.vectors.target_files`)

A run not finished yet has only its checkpoint there, in ``.checkpoint/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from ..errors import VectorsError
from ..vectors.data import VectorData
from .clashes import Clash, described, holding, not_text, spelled_alike

T = TypeVar("T")

FORMAT = "roberta-static vectors"
FORMAT_VERSION = 1
VECTORS_FILE = "vectors.npy"
VOCAB_FILE = "vocab.tsv"
META_FILE = "meta.json"
FILES = (VECTORS_FILE, VOCAB_FILE, META_FILE)
WEIGHTS_FILE = "weights.npy"
OFFSET_FILE = "offset.npy"
TARGETS_DIR = "targets"  # see roberta_static.vectors.target_files
# All a vectors folder may hold of its own.
ENTRIES = (*FILES, WEIGHTS_FILE, OFFSET_FILE, TARGETS_DIR)
CHECKPOINT_DIR = ".checkpoint"  # an unfinished distill's state, in its output folder
# What str.splitlines() ends a line at: vocab.tsv is read back with it.
LINE_BREAK = re.compile("[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def detect(path: Path) -> str | None:
    """``native`` for a folder holding ``vectors.npy``."""
    return "native" if (path / VECTORS_FILE).is_file() else None


def write(
    vectors: VectorData,
    path: Path,
    fmt: str = "native",
    sif_coefficient: float | None = None,
) -> list[Path]:
    """Write the three files into the existing folder ``path``; ``fmt`` and weighting are unused.

    Raises:
        VectorsError: A vector holds NaN or Inf, or an entry is one :func:`clashes` lists (nothing
            is written).

    """
    refused = clashes(vectors.words)
    if refused:
        raise VectorsError(
            f"a vectors folder cannot hold every entry: {described(refused)}; nothing written"
        )
    if not np.isfinite(vectors.vectors).all():
        bad = int((~np.isfinite(vectors.vectors)).any(axis=1).sum())
        raise VectorsError(f"{bad} of {len(vectors)} vectors hold NaN or Inf; nothing written")
    np.save(path / VECTORS_FILE, vectors.vectors, allow_pickle=False)
    if vectors.weights is not None:
        np.save(path / WEIGHTS_FILE, vectors.weights, allow_pickle=False)
    if vectors.offset is not None:
        np.save(path / OFFSET_FILE, vectors.offset, allow_pickle=False)

    with open(path / VOCAB_FILE, "w", encoding="utf-8", newline="\n") as handle:
        rows = zip(vectors.words, vectors.counts.tolist(), strict=True)
        handle.writelines(f"{word}\t{count}\n" for word, count in rows)
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, **vectors.meta}
    # A file name that is not UTF-8 reaches Python as lone surrogates ("\udcff"): written as
    # JSON's own escape of them, json.load gives the same name back.
    (path / META_FILE).write_text(
        json.dumps(meta, indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
        errors="backslashreplace",
    )
    return [path / name for name in FILES]


def clashes(words: Sequence[str], fmt: str = "native", case: str = "keep") -> list[Clash]:
    """Entries a vectors folder cannot hold: given twice, with a line break, or no Unicode text.

    Only the entries themselves are keys here, so ``case`` is unused.
    """
    return [
        *not_text(words),
        *holding(words, LINE_BREAK, "a line break"),
        *spelled_alike(words, words),
    ]


def read(
    path: Path, fmt: str = "native", mmap: bool = False, allow_pickle: bool = False
) -> VectorData:
    """Read a folder :func:`write` wrote; ``mmap=True`` leaves the matrix on disk, read-only.

    ``allow_pickle`` is unused: nothing here is a pickle.
    """
    if not (path / VECTORS_FILE).is_file():
        raise VectorsError(f"{path}: not a roberta-static vectors folder (no {VECTORS_FILE})")
    mode = "r" if mmap else None
    vectors = _read_file(path / VECTORS_FILE, lambda p: np.load(p, mode, allow_pickle=False))
    lines = _read_file(path / VOCAB_FILE, lambda p: p.read_text(encoding="utf-8").splitlines())
    meta = _read_file(path / META_FILE, lambda p: json.loads(p.read_text(encoding="utf-8")))
    rows = [line.rsplit("\t", 1) for line in lines]
    if any(len(row) != 2 or not row[1].isdigit() for row in rows):
        raise VectorsError(f"{path / VOCAB_FILE}: expected word<TAB>count on every line")
    weights = _read_learned(path / WEIGHTS_FILE, "weights, one per entry")
    offset = _read_learned(path / OFFSET_FILE, "offset, one value per dimension")
    if offset is not None and weights is None:
        raise VectorsError(f"{path / OFFSET_FILE}: an offset needs {WEIGHTS_FILE} beside it")
    if offset is not None and offset.shape != vectors.shape[1:]:
        dim = vectors.shape[1]
        raise VectorsError(f"{path / OFFSET_FILE}: expected {dim} values, got {len(offset)}")
    counts = np.array([int(c) for _, c in rows])
    try:
        return VectorData([w for w, _ in rows], vectors, counts, meta, weights, offset)
    except VectorsError as error:  # files of different lengths
        raise VectorsError(f"{path}: {error}") from None


def _read_learned(path: Path, what: str) -> np.ndarray | None:
    """The learned weights or offset of tuned vectors, or None when the folder has none."""
    if not path.exists():
        return None
    learned = _read_file(path, lambda p: np.load(p, allow_pickle=False))
    if learned.dtype != np.float32 or learned.ndim != 1 or not np.isfinite(learned).all():
        raise VectorsError(f"{path}: expected finite float32 {what}")
    return learned


def _read_file(path: Path, read: Callable[[Path], T]) -> T:
    """``read(path)``; a file that cannot be read is a one-line error naming it."""
    try:
        return read(path)
    except (OSError, ValueError) as error:
        if "pickled" in str(error):  # numpy reads anything not .npy as a pickle, and refuses it
            raise VectorsError(f"{path}: not a .npy file (a pickle is never loaded)") from None
        raise VectorsError(f"{path}: cannot read it ({error})") from None


def written_here(folder: Path) -> bool:
    """Whether ``folder`` holds a vectors folder's mark: ``meta.json`` with our format.

    Folders from before the format marker carry our package's name instead.
    """
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(meta, dict):
        return False
    package = meta.get("package")
    return meta.get("format") == FORMAT or (
        isinstance(package, dict) and package.get("name") == "roberta-static"
    )
