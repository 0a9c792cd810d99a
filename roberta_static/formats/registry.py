"""The formats registry: one table of the formats, their files, and the module for each family.

A family module (``native``, ``gensim``, ``static_encoder``) has ``detect(path)`` (the format of a
folder or file of its family, or None), ``write(vectors, path, fmt, sif_coefficient)`` (the paths
written), ``read(path, fmt, mmap, allow_pickle)`` (a
:class:`~roberta_static.vectors.data.VectorData`) and ``clashes(words, fmt, case)`` (the entries it
cannot hold apart, see :mod:`~roberta_static.formats.clashes`). Family modules load on first use,
and gensim only when a gensim file is written or read. Adding a format means a row in
:data:`FORMATS` and a family module that handles it.

``kv``, ``word2vec`` and ``word2vec-bin`` are gensim files; ``model2vec`` and
``sentence-transformers`` are folders holding a static sentence encoder. Each export is written
beside a vectors folder's own files (``native``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from . import native


@dataclass(frozen=True)
class Format:
    """A format: the family module that writes and reads it, and what it puts in a vectors folder.

    Attributes:
        name: As ``--formats`` spells it.
        family: The module of :mod:`roberta_static.formats` that writes, reads and detects it.
        path: Its file or folder in a vectors folder (``.`` for the vectors folder itself).
        beside: Entries its writer also puts beside ``path`` (``fnmatch`` patterns).
        owns: For a folder: every file its writer puts in it. An ``--overwrite`` replaces a
            folder holding these only.
        weighted: Whether it takes the SIF weighting (``sif_coefficient``).

    """

    name: str
    family: str
    path: str
    beside: tuple[str, ...] = ()
    owns: frozenset[str] = frozenset()
    weighted: bool = False


_ENCODER_FILES = frozenset({"model.safetensors", "tokenizer.json", "modules.json", "README.md"})
FORMATS: dict[str, Format] = {
    spec.name: spec
    for spec in (
        Format("native", "native", ".", owns=frozenset(native.ENTRIES)),
        # gensim stores a large .kv's arrays in files named after it.
        Format("kv", "gensim", "vectors.kv", beside=("vectors.kv.*",)),
        # word2vec files have no counts: they go to vectors.vocab.
        Format("word2vec", "gensim", "vectors.txt", beside=("vectors.vocab",)),
        Format("word2vec-bin", "gensim", "vectors.bin", beside=("vectors.vocab",)),
        Format(
            "model2vec",
            "static_encoder",
            "model2vec",
            owns=_ENCODER_FILES | {"config.json"},
            weighted=True,
        ),
        Format(
            "sentence-transformers",
            "static_encoder",
            "sentence-transformers",
            owns=_ENCODER_FILES | {"config_sentence_transformers.json"},
            weighted=True,
        ),
    )
}
"""Every format, in the order ``--formats`` lists them; ``native`` is never an export."""
EXPORTS = [name for name in FORMATS if name != "native"]


def family(name: str) -> ModuleType:
    """The family module of format ``name``, imported on first use (gensim is slow to import)."""
    return importlib.import_module(f"{__package__}.{FORMATS[name].family}")
