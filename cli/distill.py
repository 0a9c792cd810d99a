"""`roberta-static distill`: corpus and vocabulary in, a vectors folder (and exports) out."""

from __future__ import annotations

from pathlib import Path

import typer

from roberta_static.atomic import atomic_directory, check_output_dir

from ._util import Opt, one_line_errors
from .options import (
    ALLOW_PICKLE,
    BATCH_TOKENS,
    CASE,
    COMBINE,
    CORPUS,
    DEVICE,
    DTYPE,
    FILL_UNSEEN,
    LANG,
    LAYERS,
    MAX_CONTEXTS,
    MAX_LENGTH,
    MAX_VOCAB,
    MIN_COUNT,
    MODEL,
    OVERWRITE,
    POOL,
    QUIET,
    SPACY_MODEL,
    TEXT_FIELD,
    TRUST_REMOTE_CODE,
    VOCAB,
    Case,
    Combine,
    Device,
    DType,
    FillUnseen,
    Pool,
    make_config,
    quiet_transformers,
)


# fmt: off
def distill_command(
    corpus: list[Path] = CORPUS,
    vocab: Path | None = VOCAB,
    model: str = MODEL,
    out: Path = Opt(..., "--out", "-o", help="Output folder (vectors.npy, vocab.tsv, meta.json)"),
    layers: str = LAYERS,
    combine: Combine = COMBINE,
    pool: Pool = POOL,
    max_contexts: int = MAX_CONTEXTS,
    batch_tokens: int = BATCH_TOKENS,
    max_length: int | None = MAX_LENGTH,
    device: Device = DEVICE,
    dtype: DType = DTYPE,
    case: Case = CASE,
    lang: str = LANG,
    spacy_model: str | None = SPACY_MODEL,
    text_field: str = TEXT_FIELD,
    min_count: int = MIN_COUNT,
    max_vocab: int | None = MAX_VOCAB,
    fill_unseen: FillUnseen = FILL_UNSEEN,
    center: bool = Opt(False, "--center", help="Post-process: subtract the mean vector"),
    remove_top_pcs: int = Opt(0, "--remove-top-pcs", help="Post-process: remove this many top principal components (all-but-the-top)"),
    pca: int | None = Opt(None, "--pca", help="Post-process: reduce to this many dimensions"),
    normalize: bool = Opt(False, "--normalize", help="Post-process: unit-length vectors"),
    formats: str = Opt("", help="Also write gensim exports: kv, word2vec, word2vec-bin (comma-separated)"),
    overwrite: bool = OVERWRITE,
    trust_remote_code: bool = TRUST_REMOTE_CODE,
    allow_pickle: bool = ALLOW_PICKLE,
    quiet: bool = QUIET,
) -> None:
    # fmt: on
    """Distill static vectors of a vocabulary from a transformer over a corpus."""
    with one_line_errors():
        from roberta_static.gensim_adapter import parse_formats, write_exports
        from roberta_static.pipeline import distill

        from .progress import DistillProgress

        config = make_config(
            model=model, layers=layers, combine=combine, pool=pool, max_contexts=max_contexts,
            batch_tokens=batch_tokens, max_length=max_length, device=device, dtype=dtype,
            case=case, lang=lang, spacy_model=spacy_model, text_field=text_field,
            min_count=min_count, max_vocab=max_vocab, fill_unseen=fill_unseen,
            trust_remote_code=trust_remote_code, allow_pickle=allow_pickle, center=center,
            remove_top_pcs=remove_top_pcs, pca=pca, normalize=normalize,
        )
        export_formats = parse_formats(formats)
        check_output_dir(out, overwrite)
        quiet_transformers()
        with DistillProgress(disable=quiet) as bar:
            vectors = distill(corpus, vocab, config, progress=bar.update)
        with atomic_directory(out, overwrite) as staging:
            vectors.write_into(staging)
            write_exports(vectors, staging, export_formats)
        if not quiet:
            _summarise(vectors.meta["stats"], out)


def _summarise(stats: dict, out: Path) -> None:
    seconds = max(stats["seconds"], 1e-9)
    filled = f", {stats['entries_filled']:,} filled" if stats["entries_filled"] else ""
    typer.echo(
        f"{stats['entries_found']:,} of {stats['entries']:,} entries found{filled}; "
        f"{stats['occurrences_used']:,} occurrences in {stats['sentences_encoded']:,} of "
        f"{stats['sentences']:,} sentences ({stats['windows']:,} windows, "
        f"{stats['split_sentences']:,} sentences split); {stats['tokens']:,} tokens in "
        f"{seconds:.1f} s ({stats['tokens'] / seconds:,.0f} tokens/s)"
    )
    skipped = stats["vocabulary"]
    if skipped.get("duplicates") or skipped.get("blank_lines"):
        typer.echo(
            f"vocabulary: {skipped['duplicates']:,} duplicate entries and "
            f"{skipped['blank_lines']:,} blank lines skipped"
        )
    if stats["bad_bytes"]:
        typer.echo(f"warning: {stats['bad_bytes']:,} invalid UTF-8 bytes replaced", err=True)
    typer.echo(f"wrote {out}")
