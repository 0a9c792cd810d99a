"""`roberta-static distill`: corpus and vocabulary in, a vectors folder (and exports) out."""

from __future__ import annotations

from pathlib import Path

import typer

from roberta_static.atomic import atomic_directory, check_output_dir
from roberta_static.config import _CHOICES, DistillConfig

from ._util import Arg, Opt, choices, one_line_errors

Pool = choices("Pool", _CHOICES["pool"])
Combine = choices("Combine", _CHOICES["combine"])
Case = choices("Case", _CHOICES["case"])
Device = choices("Device", _CHOICES["device"])
DType = choices("DType", _CHOICES["dtype"])
FillUnseen = choices("FillUnseen", _CHOICES["fill_unseen"])


# fmt: off
def distill_command(
    corpus: list[Path] = Arg(..., help="Corpus files or folders: text, .gz/.bz2/.xz, .jsonl", show_default=False),
    vocab: Path | None = Opt(None, "--vocab", "-v", help="Vocabulary file, one word or phrase per line; omit to build one from the corpus"),
    model: str = Opt(..., "--model", "-m", help="Hugging Face hub id (roberta-base) or local model folder"),
    out: Path = Opt(..., "--out", "-o", help="Output folder (vectors.npy, vocab.tsv, meta.json)"),
    layers: str = Opt("1-4", "--layers", "-l", help="Hidden layers: indices, ranges (1-4), negatives (-1 = top); 0 = embeddings"),
    combine: Combine = Opt("mean", help="Combine the chosen layers"),
    pool: Pool = Opt("mean", help="Pool a word's subword vectors"),
    max_contexts: int = Opt(2000, help="Occurrences used per entry, in corpus order; 0 = all"),
    batch_tokens: int = Opt(8192, help="Token budget of one encoder batch, padding included"),
    max_length: int | None = Opt(None, help="Longest encoder input in tokens [default: the model's limit]"),
    device: Device = Opt("auto", help="auto = CUDA, then MPS, then CPU"),
    dtype: DType = Opt("auto", help="Model dtype; auto = bfloat16 on CUDA, float32 elsewhere"),
    case: Case = Opt("lower", help="lower: match and store entries lower-cased; keep: exact case"),
    lang: str = Opt("en", help="Language of the blank spaCy pipeline used to split sentences and words"),
    spacy_model: str | None = Opt(None, help="Installed spaCy pipeline (name or path) to segment with instead"),
    text_field: str = Opt("text", help="Field holding the text in .jsonl files"),
    min_count: int = Opt(5, help="Without --vocab: keep words seen at least this often"),
    max_vocab: int | None = Opt(100_000, help="Without --vocab: keep at most this many words"),
    fill_unseen: FillUnseen = Opt("none", help="decontextualized: embed entries never seen, alone (count 0)"),
    formats: str = Opt("", help="Also write gensim exports: kv, word2vec, word2vec-bin (comma-separated)"),
    overwrite: bool = Opt(False, "--overwrite", help="Replace a non-empty output folder"),
    trust_remote_code: bool = Opt(False, "--trust-remote-code", help="Run model code from the hub (only for models you trust)"),
    allow_pickle: bool = Opt(False, "--allow-pickle", help="Load pickled .bin weights when there is no safetensors file"),
    quiet: bool = Opt(False, "--quiet", "-q", help="No progress bar or summary"),
) -> None:
    # fmt: on
    """Distill static vectors of a vocabulary from a transformer over a corpus."""
    with one_line_errors():
        from roberta_static.gensim_adapter import parse_formats, write_exports
        from roberta_static.pipeline import distill

        config = DistillConfig(
            model=model, layers=layers, combine=combine.value, pool=pool.value,
            max_contexts=max_contexts, batch_tokens=batch_tokens, max_length=max_length,
            device=device.value, dtype=dtype.value, case=case.value, lang=lang,
            spacy_model=spacy_model, text_field=text_field, min_count=min_count,
            max_vocab=max_vocab, fill_unseen=fill_unseen.value,
            trust_remote_code=trust_remote_code, allow_pickle=allow_pickle,
        )
        export_formats = parse_formats(formats)
        check_output_dir(out, overwrite)
        _quiet_transformers()
        from .progress import DistillProgress

        with DistillProgress(disable=quiet) as bar:
            vectors = distill(corpus, vocab, config, progress=bar.update)
        with atomic_directory(out, overwrite) as staging:
            vectors.write_into(staging)
            write_exports(vectors, staging, export_formats)
        if not quiet:
            _summarise(vectors.meta["stats"], out)


def _quiet_transformers() -> None:
    """Our progress bar and one-line errors replace transformers' warnings and loading bars."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


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
