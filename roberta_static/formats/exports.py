"""The formats registry: one table of the formats, their files, and the module for each family.

A family module (``native``, ``gensim``, ``static_encoder``) has ``detect(path)`` (the format of a
folder or file of its family, or None), ``write(vectors, path, fmt, sif_coefficient)`` (the paths
written) and ``read(path, fmt, mmap, allow_pickle)`` (a
:class:`~roberta_static.vectors.data.VectorData`). Family modules load on first use, and gensim
only when a gensim file is written or read. Adding a format means a row in :data:`FORMATS` and a
family module that handles it.

``kv``, ``word2vec`` and ``word2vec-bin`` are gensim files; ``model2vec`` and
``sentence-transformers`` are folders holding a static sentence encoder. Each export is written
beside a vectors folder's own files (``native``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..atomic import atomic_files
from ..errors import ConfigError, VectorsError
from ..vectors.data import VectorData
from ..vectors.sif import check_sif_coefficient
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


def parse_formats(spec: str | Iterable[str]) -> list[str]:
    """Read ``"kv,word2vec"`` into a list of export formats."""
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    unknown = [n for n in names if n and n not in EXPORTS]
    if unknown:
        raise ConfigError(
            f"unknown {unknown}; expected some of {', '.join(EXPORTS)}", field="formats"
        )
    return [n for n in names if n]


def check_options(formats: Iterable[str], sif_coefficient: float | None) -> None:
    """Refuse a weighting that no requested format would use, or a bad coefficient."""
    check_sif_coefficient(sif_coefficient)
    weighted = [name for name in EXPORTS if FORMATS[name].weighted]
    if sif_coefficient is not None and not set(formats) & set(weighted):
        raise ConfigError(
            f"weights the {' and '.join(weighted)} exports only; add one of them to --formats",
            field="sif_coefficient",
        )


def write_exports(
    vectors: VectorData,
    folder: Path,
    formats: Iterable[str],
    sif_coefficient: float | None = None,
) -> list[Path]:
    """Write each format's file or folder into ``folder``.

    Args:
        vectors: The vectors to export.
        folder: Where to write (a staging folder: nothing here is renamed into place).
        formats: Formats to write.
        sif_coefficient: SIF weighting of the sentence-encoder exports (see
            :mod:`roberta_static.formats.static_encoder`); ``None`` for plain means. Tuned
            vectors take none: every export holds their rows times their learned weights, so
            a text's mean of them is its tuned vector (cosines between words do not change).

    Returns:
        Every path written, sorted.

    """
    formats = list(formats)
    check_options(formats, sif_coefficient)
    if vectors.weights is not None:  # tuned: every export holds weight * vector
        if sif_coefficient is not None:
            raise ConfigError(
                "the vectors are tuned, and their learned weights replace SIF weighting; "
                "leave it out",
                field="sif_coefficient",
            )
        folded = vectors.weighted_vectors()
        vectors = VectorData(vectors.words, folded, vectors.counts, vectors.meta)
    written: set[Path] = set()
    for name in formats:
        spec = FORMATS[name]
        written.update(_family(spec).write(vectors, folder / spec.path, name, sif_coefficient))
    return sorted(written)


def export(
    source: str | os.PathLike,
    formats: Iterable[str],
    overwrite: bool = False,
    sif_coefficient: float | None = None,
) -> list[Path]:
    """Add exports to an existing vectors folder, each renamed into place when done.

    Raises:
        ConfigError: ``formats`` is empty (``distill`` takes none to mean no exports; here, asking
            for nothing is a mistake).

    """
    folder = Path(source)
    formats = list(formats)
    if not formats:
        raise ConfigError(f"name at least one of {', '.join(EXPORTS)}", field="formats")
    check_options(formats, sif_coefficient)
    vectors = native.read(folder)
    existing = [path for name in formats for path in _targets(folder, name) if path.exists()]
    if existing and not overwrite:
        raise VectorsError(f"{existing[0]}: exists; pass --overwrite to replace it")
    for name in formats:
        _check_replaceable(folder / FORMATS[name].path, FORMATS[name].owns)
    with atomic_files(folder) as staging:
        written = write_exports(vectors, staging, formats, sif_coefficient)
    return [folder / path.name for path in written]


def read(
    path: str | os.PathLike,
    fmt: str | None = None,
    mmap: bool = False,
    allow_pickle: bool = False,
) -> VectorData:
    """Read vectors in any format of :data:`FORMATS`, told apart by what is on disk.

    What each keeps: a vectors folder everything; a ``.kv`` its words, vectors and counts; a
    word2vec file its words (phrases as ``new_york``) and vectors, and the counts in the
    ``.vocab`` file beside it; a model2vec or sentence-transformers folder its tokens and vectors
    (weighted, if the export was), and the ``meta.json`` its model card carries. A format that
    stores no counts gets gensim's stand-ins (:func:`~roberta_static.vectors.data.rank_counts`).

    Args:
        path: A folder or file.
        fmt: Read as this format (default: the one found on disk).
        mmap: Leave a vectors folder's matrix on disk, read-only.
        allow_pickle: Read a ``.kv`` file, a pickle that can run code when loaded.

    Raises:
        ConfigError: A ``.kv`` file without ``allow_pickle`` (field ``allow_pickle``).
        VectorsError: ``path`` is missing, of none of these formats, or unreadable.

    """
    path = Path(path)
    name = fmt or detect(path)
    return _family(FORMATS[name]).read(path, name, mmap=mmap, allow_pickle=allow_pickle)


def detect(path: Path) -> str:
    """The format of the folder or file at ``path``, asking each family in table order.

    Raises:
        VectorsError: Nothing is at ``path``, or a folder of none of the formats.

    """
    if not path.exists():
        raise VectorsError(f"{path}: no such vectors folder or file")
    if path.is_file() and path.name in native.FILES and native.detect(path.parent):
        raise VectorsError(f"{path}: a file of the vectors folder {path.parent}; pass the folder")
    for family in dict.fromkeys(spec.family for spec in FORMATS.values()):
        found = _module(family).detect(path)
        if found is not None:
            return found
    if (path / native.CHECKPOINT_DIR).is_dir():
        raise VectorsError(
            f"{path}: holds the checkpoint of a run not finished yet, no vectors; finish it with "
            f"roberta-static distill --resume {path}"
        )
    raise VectorsError(
        f"{path}: not a roberta-static vectors folder (no {native.VECTORS_FILE}), nor a model2vec "
        "or sentence-transformers folder"
    )


def vectors_folder_entries(folder: Path) -> tuple[str, ...] | None:
    """What a vectors folder holds, when ``folder`` is one this package wrote (see ``OwnEntries``).

    The mark is ``meta.json`` with our format: then the folder's own files and every export's.
    """
    if not native.written_here(folder):
        return None
    return tuple(
        entry
        for spec in FORMATS.values()
        for entry in (*(sorted(spec.owns) if spec.path == "." else [spec.path]), *spec.beside)
    )


def _family(spec: Format) -> ModuleType:
    return _module(spec.family)


def _module(family: str) -> ModuleType:
    """A family module, imported on first use (gensim is slow to import, and rarely needed)."""
    return importlib.import_module(f"{__package__}.{family}")


def _targets(folder: Path, name: str) -> list[Path]:
    """Every path the format's writer puts in ``folder`` (a word2vec file's counts beside it)."""
    spec = FORMATS[name]
    return [folder / spec.path, *(path for pattern in spec.beside for path in folder.glob(pattern))]


def _check_replaceable(path: Path, owns: frozenset[str]) -> None:
    """Refuse to replace an export folder holding anything its writer did not put there."""
    if not owns or not path.exists():
        return
    if not path.is_dir():
        raise VectorsError(
            f"{path}: not a folder roberta-static wrote; move it or export elsewhere"
        )
    foreign = sorted(entry.name for entry in path.iterdir() if entry.name not in owns)
    if foreign:
        raise VectorsError(
            f"{path}: holds {', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}, which "
            "roberta-static did not write; move them or export elsewhere (never replaced)"
        )
