"""`roberta-static finetune`: continue masked-LM training on a corpus, for `distill` to read."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from roberta_static.errors import ConfigError, Interrupted
from roberta_static.finetune.config import BATCH_SIZE, MINIMUMS, FinetuneConfig
from roberta_static.finetune.run import FINETUNE_FILE, RUN_DIR, saved_config
from roberta_static.stopping import StopNow, StopRequest
from roberta_static.text.corpus import check_readable
from roberta_static.text.files import find_corpus_files
from roberta_static.text.languages import check_language, check_pipeline

from ._util import (
    Flag,
    Opt,
    command_line_checks,
    flag,
    one_line_errors,
    require_inputs,
    stop_on_signals,
    typed_by_user,
)
from .options import (
    ALLOW_PICKLE,
    CORPUS,
    LANG,
    MAX_LENGTH,
    OVERWRITE,
    QUIET,
    SPACY_MODEL,
    TEXT_FIELD,
    TRUST_REMOTE_CODE,
    DType,
)


def _positive(value: float) -> float:
    """Typer's ``min=0`` allows 0, which these options refuse."""
    if not value > 0:
        raise typer.BadParameter(f"{value} is not > 0")
    return value


# fmt: off
def finetune_command(
    ctx: typer.Context,
    corpus: list[Path] = CORPUS,
    model: str | None = Opt(None, "--model", "-m", help="Masked-LM model: hub id, local folder, or minilm (with --init-mlm-head)"),
    out: Path | None = Opt(None, "--out", "-o", help="Output model folder (safetensors, tokenizer, finetune.json)"),
    max_length: int | None = MAX_LENGTH,
    mlm_probability: float = Opt(0.15, "--mlm-probability", max=1, callback=_positive, help="Share of tokens masked (of words, with --whole-word-mask), > 0"),
    whole_word_mask: bool = Flag("--whole-word-mask", help="Mask all the subword tokens of a word together"),
    epochs: float = Opt(1.0, "--epochs", callback=_positive, help="Passes over the corpus, > 0 (unless --max-steps)"),
    max_steps: int | None = Opt(None, "--max-steps", min=1, help="Optimizer steps to take", show_default="from --epochs"),
    learning_rate: float = Opt(5e-5, "--learning-rate", callback=_positive, help="Peak learning rate (AdamW, linear decay), > 0"),
    batch_size: int | None = Opt(None, "--batch-size", min=MINIMUMS["batch_size"], help="Blocks of --max-length tokens per step", show_default=str(BATCH_SIZE)),
    batch_tokens: int | None = Opt(None, "--batch-tokens", min=MINIMUMS["batch_tokens"], help="Token budget of one step instead of --batch-size: as many blocks of --max-length tokens as it holds, padding included", show_default=False),
    warmup_ratio: float = Opt(0.06, "--warmup-ratio", min=0, max=1, help="Share of steps warming the learning rate up"),
    seed: int = Opt(0, "--seed", min=0, help="Seed of the masking and of a new head"),
    device: str = Opt("auto", "--device", help="auto = CUDA, then MPS, then CPU; cuda:1 names a GPU (one device: fine-tuning runs on one)"),
    dtype: DType = Opt("auto", help="auto = bfloat16 mixed precision on CUDA, float32 elsewhere"),
    eval_fraction: float = Opt(0.02, "--eval-fraction", min=0, max=0.5, help="Share of sentences held out to measure perplexity (0 = none)"),
    save_every: int = Opt(500, "--save-every", min=1, help="Steps between checkpoints in OUT/.finetune"),
    lang: str = LANG,
    spacy_model: str | None = SPACY_MODEL,
    text_field: str = TEXT_FIELD,
    init_mlm_head: bool = Flag("--init-mlm-head", help="Train a new masked-LM head when the model has none (sentence encoders)"),
    resume: Path | None = Opt(None, "--resume", help="Continue the interrupted run whose --out was this folder (its options are reused)"),
    overwrite: bool = OVERWRITE,
    trust_remote_code: bool = TRUST_REMOTE_CODE,
    allow_pickle: bool = ALLOW_PICKLE,
    quiet: bool = QUIET,
) -> None:
    # fmt: on
    """Continue masked-LM training of a model on your corpus; distill from the result."""
    with one_line_errors():
        with command_line_checks():
            if resume is not None:
                _check_no_new_options(ctx, resume, out)
            else:
                require_inputs("finetune", {"CORPUS": corpus, "--model": model, "--out": out}, "--resume OUT")
                config = FinetuneConfig(
                    model=model, max_length=max_length, mlm_probability=mlm_probability,
                    whole_word_mask=whole_word_mask, epochs=epochs, max_steps=max_steps,
                    learning_rate=learning_rate, batch_size=batch_size, batch_tokens=batch_tokens,
                    warmup_ratio=warmup_ratio, seed=seed, device=device, dtype=dtype.value,
                    eval_fraction=eval_fraction, save_every=save_every, lang=lang,
                    spacy_model=spacy_model, text_field=text_field, init_mlm_head=init_mlm_head,
                    trust_remote_code=trust_remote_code, allow_pickle=allow_pickle,
                )
                if spacy_model is None:
                    check_language(lang)
        if resume is not None:
            out, config = resume, saved_config(resume)
        # The input, before torch, transformers or spaCy load.
        check_readable(find_corpus_files(corpus).files)
        if config.spacy_model is not None:
            check_pipeline(config.spacy_model)
        from roberta_static.atomic import output_lock
        from roberta_static.finetune.run import finetune

        from .progress import FinetuneProgressBar

        stop = StopRequest()
        from roberta_static.model.loading import quiet_transformers

        quiet_transformers()
        with output_lock(out), stop_on_signals(stop), FinetuneProgressBar(disable=quiet) as bar:
            try:
                finetune(
                    corpus, out, config, overwrite=overwrite, resume=resume is not None,
                    progress=bar.update, stop=stop,
                )
            except StopNow:
                raise Interrupted(_stopped_before_training(out, resume is not None)) from None
        if not quiet:
            _summarise(out)


def _check_no_new_options(ctx: typer.Context, resume: Path, out: Path | None) -> None:
    """A resumed run keeps the options it started with: refuse any given again."""
    if out is not None and out.resolve() == resume.resolve():
        out = None
    given = [
        flag(name)
        for name in ctx.params
        if name not in ("corpus", "resume", "quiet", "out") and typed_by_user(ctx, name)
    ]
    if given == ["--overwrite"]:
        raise ConfigError("--resume continues a run and --overwrite replaces it: pass one")
    if given or out is not None:
        flags = ", ".join(given + ["--out"] * (out is not None))
        raise ConfigError(
            f"{flags} with --resume: a resumed run keeps the options it started with "
            f"(in {resume / RUN_DIR / FINETUNE_FILE}); leave them out"
        )


def _stopped_before_training(out: Path, resumed: bool) -> str:
    if resumed:
        return (
            f"stopped before training went on; the checkpoints in {out / RUN_DIR} are unchanged; "
            f"continue with --resume {out}"
        )
    return "stopped before training began; nothing was saved"


def _summarise(out: Path) -> None:
    record = json.loads((out / FINETUNE_FILE).read_text(encoding="utf-8"))
    held_out = record["held_out"]
    if held_out["perplexity_before"] is not None:
        caveat = " (before: of the new head's random weights)" if record["mlm_head"]["new"] else ""
        typer.echo(
            f"held-out perplexity {held_out['perplexity_before']:,.2f} -> "
            f"{held_out['perplexity_after']:,.2f}{caveat}"
        )
    typer.echo(
        f"{record['steps']:,} steps, {record['tokens_seen']:,} tokens in "
        f"{record['seconds']:.1f} s; wrote {out}"
    )
