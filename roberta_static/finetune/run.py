"""Continued masked-LM training of an encoder on a corpus, before distilling from it.

Hugging Face's ``Trainer`` does the training (checkpoints, resuming, mixed precision), driven
from :mod:`.training` on the corpus as streamed blocks of whole sentences (:mod:`.data`); this
module checks the output folder and the corpus, finds the checkpoint a resumed run continues
from, and writes the result with a ``finetune.json`` record beside it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..atomic import atomic_directory, check_not_source, check_output_dir, follow_umask
from ..errors import ConfigError, CorpusError, short_list
from ..outputs import FINETUNE_FILE, RUN_DIR, finetune_run_entries
from ..progress import FinetuneProgress
from ..text.corpus import Corpus, CorpusIdentity, Position
from .config import FinetuneConfig


def finetune(
    corpus: str | Path | list[str | Path],
    out: str | Path,
    config: FinetuneConfig,
    *,
    overwrite: bool = False,
    resume: bool = False,
    progress: Callable[[FinetuneProgress], None] | None = None,
    stop: threading.Event | None = None,
) -> Path:
    """Continue masked-LM training of ``config.model`` on ``corpus``; write the model to ``out``.

    ``out`` receives the model (safetensors), its tokenizer and ``finetune.json`` (options, base
    model, steps, tokens seen, held-out perplexity before and after). Checkpoints go to
    ``out/.finetune`` every ``config.save_every`` steps; ``resume`` continues from the latest
    complete one.
    Setting ``stop`` saves a checkpoint and raises :class:`Interrupted`; a
    :class:`~roberta_static.stopping.StopRequest` asked to stop before training begins raises
    :class:`~roberta_static.stopping.StopNow`.

    Example:
        >>> finetune("domain.txt", "domain-model", FinetuneConfig("roberta-base"))  # doctest: +SKIP

    Raises:
        CorpusError: The corpus holds no text.
        ModelLoadError: The model cannot load, or has no masked-LM head and not ``init_mlm_head``.
        OutputError: ``out`` holds other files, or is not empty and not ``overwrite``/``resume``,
            or is the model's own folder.
        Interrupted: ``stop`` was set; resume with ``resume=True``.

    """
    out = Path(out)
    run_dir = out / RUN_DIR
    _check_output(out, config, overwrite, resume)
    texts = Corpus([corpus] if isinstance(corpus, (str, Path)) else corpus, config.text_field)
    identity = CorpusIdentity.of(texts.files, Position(len(texts.files), 0, 1, 0)).records()
    checkpoint = _resume_point(out, identity) if resume else None
    if next(iter(texts), None) is None:
        raise CorpusError(f"{texts}: holds no text to train on")
    from .training import Training

    ours = not out.exists(), not run_dir.exists()  # what a failed fresh run may remove
    training = Training(texts, config, run_dir, progress, stop or threading.Event())
    if checkpoint is not None:
        record = training.run(checkpoint)
    else:
        began = []

        def begin() -> None:
            _prepare_run_dir(run_dir, overwrite, {**training.record(), "corpus": identity})
            began.append(True)

        try:
            record = training.run(None, begin)
        except BaseException:
            _discard_unsaved(out, run_dir, ours[0], ours[1] or bool(began))
            raise
    record["corpus"] = identity
    with atomic_directory(out, True, (finetune_run_entries,)) as staging:
        training.save(staging)
        follow_umask(*staging.glob("*.safetensors"))  # written private, unlike the other files
        (staging / FINETUNE_FILE).write_text(json.dumps(record, indent=2) + "\n", "utf-8")
    return out


def _check_output(out: Path, config: FinetuneConfig, overwrite: bool, resume: bool) -> None:
    """Refuse an output folder the run may not write: the model's own, or one not ours."""
    if Path(config.model).is_dir():
        check_not_source(out, Path(config.model))
    if resume and not (out / RUN_DIR / FINETUNE_FILE).is_file():
        raise ConfigError(f"{out}: no unfinished fine-tuning run to resume")
    if not resume:
        check_output_dir(out, overwrite, (finetune_run_entries,))


def saved_config(out: str | Path) -> FinetuneConfig:
    """The options of the interrupted run whose output folder is ``out``, to resume it with.

    Example:
        >>> finetune("domain.txt", "out", saved_config("out"), resume=True)  # doctest: +SKIP

    Raises:
        ConfigError: ``out`` holds no interrupted run.

    """
    record = Path(out) / RUN_DIR / FINETUNE_FILE
    try:
        return FinetuneConfig(**json.loads(record.read_text(encoding="utf-8"))["config"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(f"{out}: no interrupted fine-tuning run to resume") from None


def _resume_point(out: Path, identity: list[dict[str, Any]]) -> Path:
    """The checkpoint a resumed run over the corpus of ``identity`` continues from.

    Raises:
        ConfigError: The run trains on another corpus (renamed files pass), or has no complete
            checkpoint.

    """
    run_dir = out / RUN_DIR
    # No corpus in the record: a run started before it was recorded.
    saved = json.loads((run_dir / FINETUNE_FILE).read_text("utf-8")).get("corpus") or identity
    for now, before in itertools.zip_longest(identity, saved, fillvalue={"path": "nothing"}):
        if {**now, "path": ""} != {**before, "path": ""}:
            changed = "has changed" if now["path"] == before["path"] else f"is not {before['path']}"
            raise ConfigError(
                f"{out}: cannot resume over another corpus: {now['path']} {changed} (the run "
                f"trains on {short_list([entry['path'] for entry in saved], 3)})"
            )
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        raise ConfigError(
            f"{out}: nothing to resume (no complete checkpoint in {run_dir}); start again with "
            "--overwrite"
        )
    return checkpoint


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest checkpoint written in full; incomplete ones (a crash while saving) go.

    The Trainer writes ``trainer_state.json`` last, so a checkpoint without it is incomplete.
    """
    import shutil

    steps = {
        int(path.name.removeprefix("checkpoint-")): path
        for path in run_dir.glob("checkpoint-*")
        if path.name.removeprefix("checkpoint-").isdigit()
    }
    for step in sorted(steps, reverse=True):
        if (steps[step] / "trainer_state.json").is_file():
            return steps[step]
        # Left in place, a later save at its step or the Trainer's rotation would trip on it.
        shutil.rmtree(steps[step])
    return None


def _prepare_run_dir(run_dir: Path, overwrite: bool, record: dict[str, Any]) -> None:
    """A fresh run folder in ``out``, whose record marks the folder as ours."""
    import shutil

    if overwrite and run_dir.is_dir():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)  # Trainer may have made it
    (run_dir / FINETUNE_FILE).write_text(json.dumps(record, indent=2) + "\n", "utf-8")


def _discard_unsaved(out: Path, run_dir: Path, out_is_ours: bool, run_dir_is_ours: bool) -> None:
    """After a fresh run failed before its first checkpoint: remove the folders it made."""
    import shutil

    if not run_dir_is_ours or any(run_dir.glob("checkpoint-*")):
        return  # a checkpoint to resume from, or a folder this run did not make
    shutil.rmtree(run_dir, ignore_errors=True)
    if out_is_ours:
        with contextlib.suppress(OSError):  # not empty: something else was written there
            out.rmdir()
