"""Export formats, written beside a vectors folder's own files; one writer per format.

``kv``, ``word2vec`` and ``word2vec-bin`` are gensim files (:mod:`roberta_static.formats.gensim`);
``model2vec`` and ``sentence-transformers`` are folders holding a static sentence encoder
(:mod:`roberta_static.formats.static_encoder`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from ..atomic import atomic_files
from ..errors import ConfigError, VectorsError
from ..vectors.static import EXPORT_FILES, StaticVectors

ExportFormat = Literal["kv", "word2vec", "word2vec-bin", "model2vec", "sentence-transformers"]
GENSIM_FORMATS = ("kv", "word2vec", "word2vec-bin")
SENTENCE_FORMATS = ("model2vec", "sentence-transformers")


def parse_formats(spec: str | Iterable[str]) -> list[ExportFormat]:
    """Read ``"kv,word2vec"`` into a list of export formats."""
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    unknown = [n for n in names if n and n not in EXPORT_FILES]
    if unknown:
        raise ConfigError(
            f"unknown {unknown}; expected some of {', '.join(EXPORT_FILES)}", field="formats"
        )
    return [n for n in names if n]  # type: ignore[misc]


def check_options(formats: Iterable[ExportFormat], sif_coefficient: float | None) -> None:
    """Refuse a weighting that no requested format would use, or a bad coefficient."""
    from .static_encoder import check_sif_coefficient

    check_sif_coefficient(sif_coefficient)
    if sif_coefficient is not None and not set(formats) & set(SENTENCE_FORMATS):
        raise ConfigError(
            "weights the model2vec and sentence-transformers exports only; "
            "add one of them to --formats",
            field="sif_coefficient",
        )


def write_exports(
    vectors: StaticVectors,
    folder: Path,
    formats: Iterable[ExportFormat],
    sif_coefficient: float | None = None,
) -> list[Path]:
    """Write each format's file or folder into ``folder``.

    Args:
        vectors: The vectors to export.
        folder: Where to write (a staging folder: nothing here is renamed into place).
        formats: Formats to write.
        sif_coefficient: SIF weighting of the sentence-encoder exports (see
            :mod:`roberta_static.formats.static_encoder`); ``None`` for plain means.

    """
    formats = list(formats)
    check_options(formats, sif_coefficient)
    written = [folder / EXPORT_FILES[f] for f in formats if f in SENTENCE_FORMATS]
    gensim = [f for f in formats if f in GENSIM_FORMATS]
    if gensim:
        from .gensim import write_gensim

        written += write_gensim(vectors, folder, gensim)
    if "model2vec" in formats:
        from .static_encoder import write_model2vec

        write_model2vec(vectors, folder / EXPORT_FILES["model2vec"], sif_coefficient)
    if "sentence-transformers" in formats:
        from .static_encoder import write_sentence_transformers

        write_sentence_transformers(
            vectors, folder / EXPORT_FILES["sentence-transformers"], sif_coefficient
        )
    return sorted(written)


def export(
    source: str | os.PathLike,
    formats: Iterable[ExportFormat],
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
        raise ConfigError(f"name at least one of {', '.join(EXPORT_FILES)}", field="formats")
    check_options(formats, sif_coefficient)
    vectors = StaticVectors.load(folder)
    existing = [path for f in formats for path in _targets(folder, f) if path.exists()]
    if existing and not overwrite:
        raise VectorsError(f"{existing[0]}: exists; pass --overwrite to replace it")
    for path in existing:
        _check_replaceable(path)
    with atomic_files(folder) as staging:
        written = write_exports(vectors, staging, formats, sif_coefficient)
    return [folder / path.name for path in written]


def _targets(folder: Path, fmt: ExportFormat) -> list[Path]:
    """Every path the format's writer puts in ``folder`` (a word2vec file's counts beside it)."""
    path = folder / EXPORT_FILES[fmt]
    if fmt == "kv":  # gensim keeps large arrays in files named after the .kv
        return [path, *folder.glob(f"{path.name}.*")]
    if fmt in GENSIM_FORMATS:
        from .gensim import counts_path

        return [path, counts_path(path)]
    return [path]


def _check_replaceable(path: Path) -> None:
    """Refuse to replace an export folder holding anything its writer did not put there."""
    from .static_encoder import MODEL2VEC_FILES, SENTENCE_TRANSFORMERS_FILES

    ours = {"model2vec": MODEL2VEC_FILES, "sentence-transformers": SENTENCE_TRANSFORMERS_FILES}
    if path.name not in ours:
        return
    if not path.is_dir():
        raise VectorsError(
            f"{path}: not a folder roberta-static wrote; move it or export elsewhere"
        )
    foreign = sorted(entry.name for entry in path.iterdir() if entry.name not in ours[path.name])
    if foreign:
        raise VectorsError(
            f"{path}: holds {', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}, which "
            "roberta-static did not write; move them or export elsewhere (never replaced)"
        )
