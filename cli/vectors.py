"""Commands that read vectors folders: `export`, `info`, `similar`, `merge`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ._util import Arg, Flag, Opt, command_line_checks, one_line_errors
from .options import ALLOW_PICKLED_VECTORS, OVERWRITE, SIF_COEFFICIENT, VECTORS_IN

CORPUS_FILES_LISTED = 10
"""Corpus files `info` names; the rest are counted (a folder of documents may hold millions)."""


# fmt: off
def export_command(
    vectors: Path = Arg(..., help="A vectors folder written by distill", show_default=False),
    formats: str = Opt("kv,word2vec,word2vec-bin", help="Comma-separated: kv, word2vec, word2vec-bin, model2vec, sentence-transformers"),
    overwrite: bool = Flag("--overwrite", help="Replace existing export files"),
    sif_coefficient: float | None = SIF_COEFFICIENT,
) -> None:
    # fmt: on
    """Write exports into a vectors folder: gensim files, model2vec and sentence-transformers folders."""
    with one_line_errors():
        from roberta_static.formats.exports import check_options, export, parse_formats

        with command_line_checks():
            chosen = parse_formats(formats)
            check_options(chosen, sif_coefficient)
        for path in export(vectors, chosen, overwrite, sif_coefficient):
            typer.echo(f"wrote {path}")


# fmt: off
def info_command(
    vectors: Path = VECTORS_IN,
    as_json: bool = Flag("--json", help="Print meta.json as it is"),
    allow_pickle: bool = ALLOW_PICKLED_VECTORS,
) -> None:
    # fmt: on
    """Print a vectors folder's size, model, options and run statistics."""
    with one_line_errors():
        from roberta_static.vectors.static import StaticVectors

        vecs = StaticVectors.load(vectors, allow_pickle=allow_pickle)
        if as_json:
            typer.echo(json.dumps(vecs.meta, indent=2, ensure_ascii=False))
            return
        from roberta_static.readable import DEFAULT, rows, value_text

        meta = vecs.meta
        typer.echo(f"{vectors}: {len(vecs):,} entries x {vecs.dim} dimensions")
        for section in (name for name in ("model", "config", "stats", "tune") if meta.get(name)):
            typer.echo(f"{section}:")
            unset = DEFAULT if section in ("config", "tune") else "not recorded"  # options: unset
            for name, value in rows(meta[section], unset):
                typer.echo(f"  {name}: {value}")
        corpus = meta.get("corpus", [])
        for item in corpus[:CORPUS_FILES_LISTED]:
            typer.echo(f"corpus: {item['path']} ({value_text('bytes', item['bytes'])})")
        if len(corpus) > CORPUS_FILES_LISTED:
            more = corpus[CORPUS_FILES_LISTED:]
            size = value_text("bytes", sum(item.get("bytes") or 0 for item in more))
            typer.echo(f"corpus: {len(more):,} more files ({size}; info --json lists them)")
        if "encoder_wait_seconds" in meta.get("stats", {}):
            typer.echo(_encoder_line(meta["stats"]))


def _encoder_line(stats: dict) -> str:
    """How busy the encoder side was: a starved encoder waits for input most of the run."""
    from roberta_static.readable import duration

    waited, seconds = stats["encoder_wait_seconds"], max(stats["seconds"], 1e-9)
    return (
        f"encoder: {stats['batches']:,} batches, {stats['tokens'] / max(stats['batches'], 1):,.0f} "
        f"tokens each; waited for input {duration(waited)} of the run's {duration(seconds)} "
        f"({waited / seconds:.0%})"
    )


# fmt: off
def similar_command(
    vectors: Path = VECTORS_IN,
    word: str = Arg(..., help="Word or phrase to look up", show_default=False),
    topn: int = Opt(10, "-n", "--topn", min=1, help="How many neighbours"),
    allow_pickle: bool = ALLOW_PICKLED_VECTORS,
) -> None:
    # fmt: on
    """Print the nearest neighbours of a word by cosine similarity."""
    with one_line_errors():
        from roberta_static.errors import VectorsError
        from roberta_static.quality.evaluate import find_key
        from roberta_static.vectors.static import StaticVectors

        kv = StaticVectors.load(vectors, allow_pickle=allow_pickle).to_keyed_vectors()
        key = find_key(kv, word, lower=True)
        if key is None:
            raise VectorsError(f"{vectors}: {word!r} has no vector")
        for neighbour, score in kv.most_similar(key, topn=topn):
            typer.echo(f"{score:.4f}\t{neighbour}")


# fmt: off
def merge_command(
    inputs: list[Path] = Arg(..., help="Vectors folders written by distill, of one model and the same options", show_default=False),
    out: Path = Opt(..., "--out", "-o", help="Output folder for the merged vectors (vectors.npy, vocab.tsv, meta.json)", show_default=False),
    overwrite: bool = OVERWRITE,
) -> None:
    # fmt: on
    """Merge vectors folders distilled over different texts: each entry's count-weighted mean.

    Entries are the union of the folders', counts are summed, and meta.json records every input. The folders must share the model and every option that changes the vectors (those --resume compares); post-processed folders are refused.

    With --max-contexts 0 (every occurrence) and one --vocab file, merging the folders of two texts equals distilling both at once, up to float32 rounding. Under --max-contexts N each folder used up to N occurrences of an entry, so a merged entry may average more than N (its count is the sum).
    """
    with one_line_errors():
        from roberta_static.atomic import check_not_source, output_lock
        from roberta_static.vectors.static import StaticVectors

        for source in inputs:
            check_not_source(out, source)
        with output_lock(out):
            merged = StaticVectors.load_merged(inputs)
            merged.save(out, overwrite=overwrite)
        found = merged.meta["stats"]["entries_found"]
        typer.echo(f"wrote {out}: {len(merged):,} entries ({found:,} seen), {int(merged.counts.sum()):,} occurrences")
