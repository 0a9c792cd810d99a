"""Commands about vector quality: `evaluate`, `sweep`, `postprocess`."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Column, Table

from ._util import Arg, Flag, Opt, command_line_checks, one_line_errors
from .options import (
    ALLOW_PICKLE,
    ALLOW_PICKLED_VECTORS,
    BATCH_TOKENS,
    CASE,
    CORPUS,
    DATASETS,
    DEVICE,
    DTYPE,
    FILL_UNSEEN,
    LANG,
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
    VECTORS_IN,
    VOCAB,
    Case,
    DType,
    FillUnseen,
    Pool,
    least,
    make_config,
)

if TYPE_CHECKING:
    from roberta_static.quality.evaluate import AnalogyScores, PairScores


# fmt: off
def evaluate_command(
    vectors: Path = VECTORS_IN,
    dataset: list[str] = DATASETS,
    analogies: bool = Flag("--analogies", help="Also score gensim's questions-words.txt analogies"),
    as_json: bool = Flag("--json", help="Print the results as JSON"),
    allow_pickle: bool = ALLOW_PICKLED_VECTORS,
) -> None:
    # fmt: on
    """Score vectors on word-similarity datasets (Spearman and Pearson x 100, coverage)."""
    with one_line_errors():
        from roberta_static.quality.evaluate import (
            dataset_path,
            evaluate_analogies,
            evaluate_pairs,
            load_for_evaluation,
        )
        from roberta_static.vectors.postprocess import anisotropy

        kv, lower = load_for_evaluation(vectors, allow_pickle)
        scores = [evaluate_pairs(kv, path, lower, name) for name, path in map(dataset_path, dataset)]
        analogy = evaluate_analogies(kv, lower=lower) if analogies else None
        spread = anisotropy(kv.vectors)
        if as_json:
            typer.echo(json.dumps(_report(vectors, scores, analogy, spread), indent=2))
        else:
            _print_scores(scores, analogy, spread)
        for s in scores:
            warn_coverage(s.dataset, s.covered, s.pairs, "pairs")
        if analogy:
            warn_coverage(f"analogies ({analogy.dataset})", analogy.covered, analogy.questions, "questions")


def _report(vectors: Path, scores: list[PairScores], analogy: AnalogyScores | None, spread: float) -> dict:
    """The --json report; a score that cannot be computed is null."""
    datasets = [
        {**asdict(s), "spearman": _finite(s.spearman), "pearson": _finite(s.pearson), "coverage": s.coverage, "low_coverage": s.low_coverage}
        for s in scores
    ]
    analogies = None
    if analogy:
        accuracy = analogy.accuracy if analogy.covered else None
        analogies = {**asdict(analogy), "accuracy": accuracy, "coverage": analogy.coverage, "low_coverage": analogy.low_coverage}
    return {"vectors": str(vectors), "anisotropy": spread, "datasets": datasets, "analogies": analogies}


def _print_scores(scores: list[PairScores], analogy: AnalogyScores | None, spread: float) -> None:
    table = Table("dataset", "pairs", "covered", "coverage %", "Spearman", "Pearson")
    for s in scores:
        table.add_row(s.dataset, str(s.pairs), str(s.covered), f"{s.coverage:.1f}", _score(s.spearman, ".2f"), _score(s.pearson, ".2f"))
    console = Console()
    console.print(table)
    for s in scores:
        if s.oov_pairs:
            shown = ", ".join(f"{a}/{b}" for a, b in s.oov_pairs[:8])
            more = f" and {len(s.oov_pairs) - 8} more" if len(s.oov_pairs) > 8 else ""
            console.print(f"{s.dataset}: {len(s.oov_pairs)} pairs without vectors: {shown}{more}")
    if analogy:
        covered = f"{analogy.covered:,} covered questions ({analogy.coverage:.1f}% of {analogy.questions:,})"
        score = f"{analogy.accuracy:.2f}% of {covered}" if analogy.covered else f"no score, {covered}"
        console.print(f"analogies ({analogy.dataset}): {score}")
    console.print(f"anisotropy (mean cosine of random pairs): {spread:.3f}")


# fmt: off
def sweep_command(
    corpus: list[Path] = CORPUS,
    vocab: Path | None = VOCAB,
    model: str = MODEL,
    out: Path = Opt(..., "--out", "-o", help="Folder for sweep.csv and sweep.png"),
    dataset: list[str] = DATASETS,
    pool: Pool = POOL,
    max_contexts: int = MAX_CONTEXTS,
    batch_tokens: int | None = BATCH_TOKENS,
    max_length: int | None = MAX_LENGTH,
    device: str = DEVICE,
    dtype: DType = DTYPE,
    case: Case = CASE,
    lang: str = LANG,
    spacy_model: str | None = SPACY_MODEL,
    text_field: str = TEXT_FIELD,
    min_count: int = MIN_COUNT,
    max_vocab: int | None = MAX_VOCAB,
    fill_unseen: FillUnseen = FILL_UNSEEN,
    overwrite: bool = OVERWRITE,
    trust_remote_code: bool = TRUST_REMOTE_CODE,
    allow_pickle: bool = ALLOW_PICKLE,
    quiet: bool = QUIET,
) -> None:
    # fmt: on
    """Score every layer and range of layers in one pass; write a table, sweep.csv and sweep.png."""
    with one_line_errors():
        from roberta_static.atomic import output_lock

        config = make_config(
            model=model, pool=pool, max_contexts=max_contexts, batch_tokens=batch_tokens,
            max_length=max_length, device=device, dtype=dtype, case=case, lang=lang,
            spacy_model=spacy_model, text_field=text_field, min_count=min_count,
            max_vocab=max_vocab, fill_unseen=fill_unseen, trust_remote_code=trust_remote_code,
            allow_pickle=allow_pickle,
        )
        from roberta_static.quality.sweep import check_sweep_folder, run_sweep, write_sweep

        with output_lock(out):
            check_sweep_folder(out, overwrite)
            # torch, transformers and spaCy load only once the options and paths have passed.
            from roberta_static.model.loading import quiet_transformers

            from .progress import DistillProgress

            quiet_transformers()
            with DistillProgress(disable=quiet) as bar:
                results = run_sweep(corpus, vocab, config, dataset, progress=bar.update)
            table, figure = write_sweep(results, out, overwrite)
        _print_sweep(results)
        typer.echo(f"wrote {table} and {figure}")


def _print_sweep(results: list) -> None:
    datasets = list(results[0].scores)
    console = Console()
    # One table per post-processing keeps every label and header whole at 80 columns (a label
    # wrapped over two rows, "mean" over "0-2", reads as two candidates).
    for processing in dict.fromkeys(r.postprocessing for r in results):
        table = Table(
            Column("candidate", no_wrap=True),
            *(Column(d, no_wrap=True) for d in datasets),
            Column("anisotropy", no_wrap=True),
            title=f"Spearman x 100, post-processing: {processing}",
        )
        # On a shallow model two candidates can be the same layers: one row each.
        rows: dict = {}
        for r in results:
            if r.postprocessing == processing:
                rows.setdefault(r.candidate.label, r)
        for label, r in rows.items():
            scores = [_score(r.scores[d].spearman, ".1f") for d in datasets]
            table.add_row(label, *scores, f"{r.anisotropy:.3f}")
        console.print(table)
    for d in datasets:
        covered, pairs = results[0].scores[d].covered, results[0].scores[d].pairs  # one vocabulary
        warn_coverage(d, covered, pairs, "pairs")
        scored = [r for r in results if math.isfinite(r.scores[d].spearman)]
        if not scored:
            why = f"no score on {covered} of {pairs} pairs" if covered else f"no pairs covered (0 of {pairs})"
            console.print(f"best on {d}: none, {why}")
            continue
        best = max(scored, key=lambda r: r.scores[d].spearman)
        console.print(
            f"best on {d}: {best.candidate.label}, {best.postprocessing} "
            f"({best.scores[d].spearman:.2f}, {covered} of {pairs} pairs)"
        )


def warn_coverage(dataset: str, covered: int, total: int, items: str) -> None:
    """Caution on stderr when a score rests on too few of a dataset's items to mean much."""
    from roberta_static.quality.evaluate import MIN_COVERAGE, MIN_COVERED, low_coverage

    if not covered:
        typer.echo(f"warning: {dataset}: none of its {total:,} {items} is covered; no score", err=True)
    elif low_coverage(covered, total):
        typer.echo(
            f"warning: {dataset}: scores on {covered:,} of {total:,} {items} ({100 * covered / total:.1f}%) "
            f"mean little; a score needs {MIN_COVERED} covered {items} and {MIN_COVERAGE:.0f}% of the dataset",
            err=True,
        )


def _score(value: float, spec: str) -> str:
    return format(value, spec) if math.isfinite(value) else "-"


def _finite(value: float) -> float | None:
    """NaN as JSON's null (json.dumps would write NaN, which is not JSON)."""
    return value if math.isfinite(value) else None


# fmt: off
def postprocess_command(
    source: Path = VECTORS_IN,
    out: Path = Arg(..., help="Folder for the processed vectors", show_default=False),
    center: bool = Flag("--center", help="Subtract the mean vector"),
    remove_top_pcs: int = Opt(0, "--remove-top-pcs", min=least("remove_top_pcs"), help="Remove this many top principal components (all-but-the-top)"),
    pca: int | None = Opt(None, "--pca", min=least("pca"), help="Reduce to this many dimensions"),
    normalize: bool = Flag("--normalize", help="Scale vectors to unit length"),
    overwrite: bool = OVERWRITE,
    allow_pickle: bool = ALLOW_PICKLED_VECTORS,
) -> None:
    # fmt: on
    """Post-process vectors into a new vectors folder (steps run in the order listed)."""
    with one_line_errors():
        from roberta_static.atomic import check_not_source, output_lock
        from roberta_static.errors import ConfigError
        from roberta_static.vectors.postprocess import PostProcessing, postprocess
        from roberta_static.vectors.static import StaticVectors

        with command_line_checks():
            steps = PostProcessing(center, remove_top_pcs, pca, normalize)
            if steps.is_identity:
                raise ConfigError("postprocess: choose at least one of --center, --remove-top-pcs, --pca, --normalize")
        check_not_source(out, source)
        with output_lock(out):
            vectors = StaticVectors.load(source, allow_pickle=allow_pickle)
            postprocess(vectors, steps).save(out, overwrite=overwrite)
        typer.echo(f"wrote {out}")
