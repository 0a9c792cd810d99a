"""gensim interop: `KeyedVectors` with counts, and word2vec / `.kv` exports with matching loaders.

word2vec files separate fields by spaces, so phrases are written with ``_`` between their words
(the convention of gensim's ``Phrases``); the ``.kv`` export keeps them as they are. The word2vec
format has no counts: they go into ``vectors.vocab`` beside it (``word count`` lines), which gensim
reads back with ``load_word2vec_format(..., fvocab=...)``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from gensim.models import KeyedVectors

from ..errors import ConfigError, VectorsError
from ..vectors.static import EXPORT_FILES, StaticVectors

GensimFormat = Literal["kv", "word2vec", "word2vec-bin"]


def counts_path(word2vec_file: str | os.PathLike) -> Path:
    """The counts file of a word2vec file (``vectors.txt`` and ``.bin`` share ``vectors.vocab``)."""
    return Path(word2vec_file).with_suffix(".vocab")


def write_gensim(
    vectors: StaticVectors, folder: Path, formats: Iterable[GensimFormat]
) -> list[Path]:
    """Write each format's file (``vectors.kv``, ``.txt``, ``.bin``, ``.vocab``) into ``folder``."""
    written = set()
    keyed: dict[str | None, KeyedVectors] = {}  # one build per phrase spelling
    for fmt in formats:
        path = folder / EXPORT_FILES[fmt]
        joiner = None if fmt == "kv" else "_"
        if joiner not in keyed:
            keyed[joiner] = vectors.to_keyed_vectors(phrase_joiner=joiner)
        if fmt == "kv":
            keyed[joiner].save(str(path))
        else:
            counts = counts_path(path)
            keyed[joiner].save_word2vec_format(
                str(path), fvocab=str(counts), binary=fmt == "word2vec-bin"
            )
            written.add(counts)
        written.add(path)
    return sorted(written)


def load_keyed_vectors(path: str | os.PathLike, allow_pickle: bool = False) -> KeyedVectors:
    """Load vectors from a roberta-static folder, a word2vec ``.txt``/``.bin``, or a gensim ``.kv``.

    A word2vec file gets its counts from the ``.vocab`` file beside it when there is one (else
    gensim makes up counts from the row order). A ``.kv`` file is a pickle, which can run code when
    loaded: it is read only with ``allow_pickle=True``.

    Raises:
        ConfigError: A ``.kv`` file without ``allow_pickle`` (its ``field`` names the option, so
            each caller can name its own spelling: ``--allow-pickle``, spaCy's ``allow_pickle``).
        VectorsError: No such file, or not a word2vec file.

    """
    path = Path(path)
    if path.is_dir():
        return StaticVectors.load(path).to_keyed_vectors()
    if not path.is_file():
        raise VectorsError(f"{path}: no such vectors folder or file")
    if path.suffix == ".kv":
        if not allow_pickle:
            raise ConfigError(
                f"needed for {path}, a pickle (gensim .kv) that can run code when loaded; turn it "
                "on only for a file you trust",
                field="allow_pickle",
            )
        return KeyedVectors.load(str(path))
    counts = counts_path(path)
    fvocab = str(counts) if counts.is_file() else None
    try:
        return KeyedVectors.load_word2vec_format(
            str(path), fvocab=fvocab, binary=path.suffix == ".bin"
        )
    except (ValueError, UnicodeDecodeError, EOFError) as error:
        also = f", or {counts} is not a 'word count' file," if fvocab else ""
        raise VectorsError(f"{path}: not a word2vec file{also} ({error})") from None
