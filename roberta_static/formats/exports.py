"""Exports: parse ``--formats``, write the exports of a vectors folder, read any format back.

The formats and their files are the table of :mod:`~roberta_static.formats.registry`. An export
holds every entry or is not written (:func:`~roberta_static.formats.holding.check_entries`).
"""

from __future__ import annotations

import filecmp
import os
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path

from ..atomic import atomic_files
from ..errors import ConfigError, VectorsError, short_list
from ..vectors.data import VectorData
from ..vectors.sif import check_sif_coefficient
from . import native
from .clashes import listed
from .holding import check_entries
from .registry import EXPORTS, FORMATS, family


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
    source: str | os.PathLike | None = None,
) -> list[Path]:
    """Write each format's file or folder into ``folder``.

    Args:
        vectors: The vectors to export.
        folder: Where to write (a staging folder: nothing here is renamed into place).
        formats: Formats to write.
        sif_coefficient: SIF weighting of the sentence-encoder exports (see
            :mod:`roberta_static.formats.static_encoder`); ``None`` for plain means. Tuned
            vectors take none: every export holds their rows times their learned weights, plus
            their offset, so a text's mean of them is its tuned vector.
        source: What errors call the vectors (their folder, as the user named it).

    Returns:
        Every path written, sorted.

    Raises:
        VectorsError: A format cannot hold every entry apart (see :func:`check_entries`); nothing
            is written.

    """
    formats = list(formats)
    check_options(formats, sif_coefficient)
    check_entries(vectors.words, vectors.case, formats, source or "the vectors")
    if vectors.weights is not None:  # tuned: every export holds weight * vector + offset
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
        written.update(family(spec.name).write(vectors, folder / spec.path, name, sif_coefficient))
    return sorted(written)


def export(
    source: str | os.PathLike,
    formats: Iterable[str],
    overwrite: bool = False,
    sif_coefficient: float | None = None,
) -> list[Path]:
    """Add exports to an existing vectors folder, each renamed into place when done.

    A file that two formats share (word2vec's and word2vec-bin's counts, ``vectors.vocab``) is
    left as it is when it already holds what would be written.

    Raises:
        ConfigError: ``formats`` is empty (``distill`` takes none to mean no exports; here, asking
            for nothing is a mistake).
        VectorsError: An export is there already (without ``overwrite``; the message names each
            one), or a format cannot hold every entry apart (see :func:`check_entries`). Nothing
            is written.

    """
    folder = Path(source)
    formats = list(formats)
    if not formats:
        raise ConfigError(f"name at least one of {', '.join(EXPORTS)}", field="formats")
    check_options(formats, sif_coefficient)
    vectors = native.read(folder)
    if not overwrite:
        _check_new(folder, formats)
    for name in formats:
        _check_replaceable(folder / FORMATS[name].path, FORMATS[name].owns)
    with atomic_files(folder) as staging:
        written = write_exports(vectors, staging, formats, sif_coefficient, folder)
        unchanged = set() if overwrite else _drop_unchanged(staging, folder, formats)
    return [folder / path.name for path in written if path.name not in unchanged]


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
    return family(name).read(path, name, mmap=mmap, allow_pickle=allow_pickle)


def detect(path: Path) -> str:
    """The format of the folder or file at ``path``, asking each family in table order.

    Raises:
        VectorsError: Nothing is at ``path``, or a folder of none of the formats.

    """
    if not path.exists():
        raise VectorsError(f"{path}: no such vectors folder or file")
    if path.is_file() and path.name in native.FILES and native.detect(path.parent):
        raise VectorsError(f"{path}: a file of the vectors folder {path.parent}; pass the folder")
    one_of_each = {spec.family: spec.name for spec in FORMATS.values()}
    for name in one_of_each.values():
        found = family(name).detect(path)
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


def _check_new(folder: Path, formats: list[str]) -> None:
    """Refuse exports that ``folder`` holds already, naming each (without ``--overwrite``)."""
    there = [name for name in formats if (folder / FORMATS[name].path).exists()]
    if there:
        paths = [f"{folder / FORMATS[name].path} (the {name} export)" for name in there]
        exist, them = ("exists", "it") if len(there) == 1 else ("exist", "them")
        raise VectorsError(
            f"{short_list(paths)}: {exist}; pass --overwrite to replace {them}, or leave "
            f"{listed(there)} out of --formats"
        )


def _drop_unchanged(staging: Path, folder: Path, formats: list[str]) -> set[str]:
    """Leave out of ``staging`` the shared files that ``folder`` holds as written; their names.

    One that ``folder`` holds with other contents is refused, naming the formats that write it
    (the exports themselves were checked before writing). Only without ``--overwrite``.
    """
    unchanged = set()
    for item in sorted(staging.iterdir()):
        existing = folder / item.name
        if not existing.exists():
            continue
        if not (existing.is_file() and filecmp.cmp(item, existing, shallow=False)):
            writers = [name for name in formats if _writes(name, item.name)] or formats
            shared = [name for name in FORMATS if _writes(name, item.name)]
            also = f" (a file {listed(shared)} share)" if len(shared) > 1 else ""
            raise VectorsError(
                f"{existing}: exists, and holds other than what {listed(writers)} would write "
                f"there{also}; pass --overwrite to replace it"
            )
        item.unlink()
        unchanged.add(item.name)
    return unchanged


def _writes(name: str, entry: str) -> bool:
    """Whether format ``name`` writes ``entry`` beside its own file."""
    return any(fnmatchcase(entry, pattern) for pattern in FORMATS[name].beside)


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
