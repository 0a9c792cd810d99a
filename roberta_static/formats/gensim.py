"""gensim's files: `.kv` (``KeyedVectors.save``), word2vec text and binary, with matching readers.

word2vec files separate fields by spaces, so phrases are written with ``_`` between their words
(the convention of gensim's ``Phrases``) and read back so; the ``.kv`` export keeps them as they
are. Entries a file cannot hold apart are refused (:func:`clashes`): in word2vec files ``new york``
beside ``new_york``, other whitespace (gensim reads the counts file by whitespace), an empty entry.
The word2vec format has no counts: they go into ``vectors.vocab`` beside it (``word count`` lines),
which gensim reads back with ``load_word2vec_format(..., fvocab=...)``. gensim loads only when one
of these files is written or read.
"""

from __future__ import annotations

import os
import pickle
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError, VectorsError
from ..vectors.data import VectorData, rank_counts
from .clashes import Clash, described, holding, spelled_alike

if TYPE_CHECKING:
    from gensim.models import KeyedVectors

PHRASE_JOINER = "_"
# Whitespace but the space: str.split() splits at it, as gensim reads a counts file.
INNER_WHITESPACE = re.compile(r"[^\S ]")


def spelled(word: str) -> str:
    """An entry as word2vec files write it: ``new_york`` for ``new york``."""
    return PHRASE_JOINER.join(word.split(" "))


def clashes(words: Sequence[str], fmt: str, case: str = "keep") -> list[Clash]:
    """Entries ``fmt`` cannot hold apart: spelled alike, or (word2vec) empty or with whitespace.

    A ``.kv`` keys each entry by itself; ``case`` is unused (gensim keeps every spelling).
    """
    if fmt == "kv":
        return spelled_alike(words, words)
    keys = [spelled(word) for word in words]
    empty = [Clash((word,), "is empty") for word, key in zip(words, keys, strict=True) if not key]
    inner = "whitespace that word2vec files cannot hold"
    return [*empty, *holding(words, INNER_WHITESPACE, inner), *spelled_alike(words, keys)]


def counts_path(word2vec_file: str | os.PathLike) -> Path:
    """The counts file of a word2vec file (``vectors.txt`` and ``.bin`` share ``vectors.vocab``)."""
    return Path(word2vec_file).with_suffix(".vocab")


def detect(path: Path) -> str | None:
    """A file's format: ``kv`` for ``.kv``, ``word2vec-bin`` for ``.bin``, else ``word2vec``."""
    if not path.is_file():
        return None
    return {".kv": "kv", ".bin": "word2vec-bin"}.get(path.suffix, "word2vec")


def write(
    vectors: VectorData, path: Path, fmt: str, sif_coefficient: float | None = None
) -> list[Path]:
    """Write ``fmt`` at ``path`` (a word2vec file's counts beside it); no weighting here.

    Raises:
        VectorsError: ``fmt`` cannot hold every entry apart (see :func:`clashes`).

    """
    refused = clashes(vectors.words, fmt)
    if refused:
        raise VectorsError(f"the {fmt} export cannot hold every entry: {described(refused)}")
    keyed = vectors.to_keyed_vectors(phrase_joiner=None if fmt == "kv" else PHRASE_JOINER)
    if fmt == "kv":
        keyed.save(str(path))
        return [path]
    counts = counts_path(path)
    keyed.save_word2vec_format(str(path), fvocab=str(counts), binary=fmt == "word2vec-bin")
    return [path, counts]


def read(path: Path, fmt: str, mmap: bool = False, allow_pickle: bool = False) -> VectorData:
    """Read a ``.kv`` (only with ``allow_pickle``) or a word2vec file; ``mmap`` is unused.

    A word2vec file gets its counts from the ``.vocab`` file beside it when there is one, else
    gensim's stand-ins (:func:`~roberta_static.vectors.data.rank_counts`), as does a ``.kv``
    without counts. Rows keep the file's order.

    Raises:
        ConfigError: A ``.kv`` file without ``allow_pickle`` (its ``field`` names the option, so
            each caller can name its own spelling: ``--allow-pickle``, spaCy's ``allow_pickle``).
        VectorsError: Not a file of this format.

    """
    keyed = _load_kv(path, allow_pickle) if fmt == "kv" else _load_word2vec(path, fmt)
    counts = keyed.expandos.get("count")
    return VectorData(
        list(keyed.index_to_key),
        keyed.vectors,
        rank_counts(len(keyed)) if counts is None else counts,
    )


def _load_kv(path: Path, allow_pickle: bool) -> KeyedVectors:
    """A pickled ``KeyedVectors``: pickles can run code when loaded, so only when allowed."""
    from gensim.models import KeyedVectors

    if not allow_pickle:
        raise ConfigError(
            f"needed for {path}, a pickle (gensim .kv) that can run code when loaded; turn it "
            "on only for a file you trust",
            field="allow_pickle",
        )
    try:
        keyed = KeyedVectors.load(str(path))
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError) as error:
        raise VectorsError(f"{path}: not a gensim .kv file ({error})") from None
    if not isinstance(keyed, KeyedVectors):
        raise VectorsError(f"{path}: holds a {type(keyed).__name__}, not gensim KeyedVectors")
    return keyed


def _load_word2vec(path: Path, fmt: str) -> KeyedVectors:
    from gensim.models import KeyedVectors

    counts = counts_path(path)
    fvocab = str(counts) if counts.is_file() else None
    try:
        return KeyedVectors.load_word2vec_format(
            str(path), fvocab=fvocab, binary=fmt == "word2vec-bin"
        )
    except (ValueError, UnicodeDecodeError, EOFError):
        # gensim's own message names Python's parsing, not the file's problem.
        also = f" (or {counts} beside it is not 'word count' lines)" if fvocab else ""
        layout = "a 'COUNT DIM' line, then a word and its DIM numbers per line"
        if fmt == "word2vec-bin":
            layout = "a 'COUNT DIM' line, then a word and its DIM float32s per entry"
        raise VectorsError(f"{path}: not a word2vec file{also}: expected {layout}") from None
