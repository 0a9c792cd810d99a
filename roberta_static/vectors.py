"""`StaticVectors`: the distilled words, their float32 matrix, counts and provenance.

Only numpy is needed here. The on-disk format is a folder of three plain files::

    vectors.npy   float32 [V, D] (np.save, no pickle)
    vocab.tsv     word<TAB>count per row
    meta.json     format marker, config, model, corpus, stats

plus the gensim exports written beside them on request.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .atomic import atomic_directory
from .errors import VectorsError

if TYPE_CHECKING:
    from gensim.models import KeyedVectors

FORMAT = "roberta-static vectors"
FORMAT_VERSION = 1
VECTORS_FILE = "vectors.npy"
VOCAB_FILE = "vocab.tsv"
META_FILE = "meta.json"
EXPORT_FILES: dict[str, str] = {
    "kv": "vectors.kv",
    "word2vec": "vectors.txt",
    "word2vec-bin": "vectors.bin",
}
# gensim stores a large .kv's arrays beside it (vectors.kv.vectors.npy).
_FOLDER_ENTRIES = (VECTORS_FILE, VOCAB_FILE, META_FILE, *EXPORT_FILES.values(), "vectors.kv.*")


@dataclass
class StaticVectors:
    """Static vectors of words and phrases.

    Attributes:
        words: One entry per row (phrases keep their inner spaces).
        vectors: ``float32`` matrix of shape ``[len(words), dim]``.
        counts: Occurrences averaged into each row (0 for a decontextualized fill).
        meta: Provenance written to ``meta.json``.

    Example:
        >>> vecs = StaticVectors(["cat", "dog"], np.eye(2, dtype=np.float32), np.array([3, 1]))
        >>> vecs["dog"].tolist(), vecs.dim
        ([0.0, 1.0], 2)

    """

    words: list[str]
    vectors: np.ndarray
    counts: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.vectors = np.asarray(self.vectors, dtype=np.float32)
        self.counts = np.asarray(self.counts, dtype=np.int64)
        rows = len(self.words)
        if self.vectors.ndim != 2 or self.vectors.shape[0] != rows or self.counts.shape != (rows,):
            raise VectorsError(
                f"{rows} words need a [{rows}, D] matrix and {rows} counts; got "
                f"{list(self.vectors.shape)} and {list(self.counts.shape)}"
            )
        self._index = {word: i for i, word in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def __getitem__(self, word: str) -> np.ndarray:
        return self.vectors[self._index[word]]

    def __str__(self) -> str:
        return f"StaticVectors<{len(self)} words, dim {self.dim}>"

    @property
    def case(self) -> str:
        """Case policy the vectors were distilled with: ``lower`` or ``keep``."""
        return self.meta.get("config", {}).get("case") or guess_case(self.words)

    @property
    def dim(self) -> int:
        """Width of each vector."""
        return int(self.vectors.shape[1])

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> Path:
        """Write the folder atomically.

        An existing non-empty folder is replaced only with ``overwrite=True``, and only when it is
        a vectors folder this package wrote, holding nothing else.
        """
        with atomic_directory(path, overwrite, [vectors_folder_entries]) as staging:
            self.write_into(staging)
        return Path(path)

    def write_into(self, folder: Path) -> None:
        """Write the three files into an existing folder (used by ``save`` and the CLI)."""
        if not np.isfinite(self.vectors).all():
            bad = int((~np.isfinite(self.vectors)).any(axis=1).sum())
            raise VectorsError(f"{bad} of {len(self)} vectors hold NaN or Inf; nothing written")
        np.save(folder / VECTORS_FILE, self.vectors, allow_pickle=False)
        with open(folder / VOCAB_FILE, "w", encoding="utf-8", newline="\n") as handle:
            rows = zip(self.words, self.counts.tolist(), strict=True)
            handle.writelines(f"{word}\t{count}\n" for word, count in rows)
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, **self.meta}
        (folder / META_FILE).write_text(
            json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> StaticVectors:
        """Read a folder written by :meth:`save` (never unpickles)."""
        folder = Path(path)
        if not (folder / VECTORS_FILE).is_file():
            raise VectorsError(f"{folder}: not a roberta-static vectors folder (no {VECTORS_FILE})")
        try:
            vectors = np.load(folder / VECTORS_FILE, allow_pickle=False)
            lines = (folder / VOCAB_FILE).read_text(encoding="utf-8").splitlines()
            meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise VectorsError(f"{folder}: cannot read vectors ({error})") from None
        rows = [line.rsplit("\t", 1) for line in lines]
        if any(len(row) != 2 or not row[1].isdigit() for row in rows):
            raise VectorsError(f"{folder / VOCAB_FILE}: expected word<TAB>count on every line")
        return cls([w for w, _ in rows], vectors, np.array([int(c) for _, c in rows]), meta)

    def to_keyed_vectors(self) -> KeyedVectors:
        """Gensim ``KeyedVectors`` with counts, rows sorted by descending count."""
        from .gensim_adapter import to_keyed_vectors

        return to_keyed_vectors(self)


def vectors_folder_entries(folder: Path) -> tuple[str, ...] | None:
    """What a vectors folder holds, when ``folder`` is one this package wrote (see ``OwnEntries``).

    The mark is ``meta.json`` with our format (or, from before the format marker, our package).
    """
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    package = meta.get("package")
    ours = meta.get("format") == FORMAT or (
        isinstance(package, dict) and package.get("name") == "roberta-static"
    )
    return _FOLDER_ENTRIES if ours else None


def guess_case(words: list[str]) -> str:
    """``lower`` when no word has an upper-case letter (lookups may lower-case), else ``keep``."""
    return "lower" if all(word == word.lower() for word in words) else "keep"
