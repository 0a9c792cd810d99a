"""Commands that read a vectors folder: `export`, `info`, `similar`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from roberta_static.errors import short_list

from ._util import Arg, Flag, Opt, one_line_errors
from .options import ALLOW_PICKLED_VECTORS, SIF_COEFFICIENT, VECTORS_IN


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
        from roberta_static.formats.exports import export, parse_formats

        for path in export(vectors, parse_formats(formats), overwrite, sif_coefficient):
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
        meta = vecs.meta
        typer.echo(f"{vectors}: {len(vecs):,} entries x {vecs.dim} dimensions")
        for section in (name for name in ("model", "config", "stats") if meta.get(name)):
            typer.echo(f"{section}:")
            for key, value in meta[section].items():
                long = isinstance(value, list) and len(value) > 10  # entries never found, say
                typer.echo(f"  {key}: {short_list(value) if long else value}")
        for item in meta.get("corpus", []):
            typer.echo(f"corpus: {item['path']} ({item['bytes']:,} bytes)")
        if "encoder_wait_seconds" in meta.get("stats", {}):
            typer.echo(_encoder_line(meta["stats"]))


def _encoder_line(stats: dict) -> str:
    """How busy the encoder side was: a starved encoder waits for input most of the run."""
    waited, seconds = stats["encoder_wait_seconds"], max(stats["seconds"], 1e-9)
    return (
        f"encoder: {stats['batches']:,} batches, {stats['tokens'] / max(stats['batches'], 1):,.0f} "
        f"tokens each; waited for input {waited:,.1f} s of the run's {seconds:,.1f} s "
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
