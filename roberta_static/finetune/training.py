"""The ``Trainer`` side of :func:`roberta_static.finetune.run.finetune`: model, data, loop, record.

torch and transformers are imported here (and in ``encoder.py``), never by the CLI's option code.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import (
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from ..errors import ConfigError, CorpusError, Interrupted, ModelLoadError
from ..model.encoder import resolve_device, resolve_max_length
from ..model.loading import load_pretrained, model_fingerprint
from ..progress import FinetuneProgress
from ..stopping import StopRequest
from ..text.corpus import Corpus
from ..text.segment import Segmenter
from .config import FinetuneConfig
from .data import SeededMasking, SentenceBlocks, masking_collator

SECONDS_FILE = "roberta_static_seconds.json"  # in a checkpoint: the training time until it


def _seconds_saved(checkpoint: Path | None) -> float:
    """Training time before ``checkpoint`` (0 without one, or from a checkpoint without it)."""
    if checkpoint is None:
        return 0.0
    try:
        return float(json.loads((checkpoint / SECONDS_FILE).read_text("utf-8"))["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


class _Report(TrainerCallback):
    """Feeds the progress callback and stops (with a checkpoint) when ``stop`` is set."""

    def __init__(
        self, progress: Callable[[FinetuneProgress], None] | None, stop: threading.Event
    ) -> None:
        self.progress, self.stop = progress, stop
        self.loss: float | None = None
        self.stopped = False
        self.started, self.earlier = time.perf_counter(), 0.0

    def seconds(self) -> float:
        """Training time of the run so far, its earlier (resumed) parts included."""
        return self.earlier + time.perf_counter() - self.started

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Keep the time trained so far with the checkpoint, for a resumed run's record."""
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir():
            (folder / SECONDS_FILE).write_text(json.dumps({"seconds": self.seconds()}), "utf-8")

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        """Report the step just logged (every step) with its training loss."""
        if not logs or "loss" not in logs:
            return
        self.loss = float(logs["loss"])
        if self.progress is not None:
            tokens = int(getattr(state, "num_input_tokens_seen", 0) or 0)
            self.progress(FinetuneProgress(state.global_step, state.max_steps, self.loss, tokens))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """On ``stop``, save a checkpoint and end training."""
        if self.stop.is_set():
            self.stopped = True
            control.should_save = True
            control.should_training_stop = True
        return control


class Training:
    """One fine-tuning run: loads the model and data, trains, evaluates and saves.

    Args:
        corpus: The corpus (re-read on every pass).
        config: The run's options.
        run_dir: Folder for the Trainer's checkpoints.
        progress: Called after every step.
        stop: When set, the run saves a checkpoint and raises :class:`Interrupted`.

    """

    def __init__(
        self,
        corpus: Corpus,
        config: FinetuneConfig,
        run_dir: Path,
        progress: Callable[[FinetuneProgress], None] | None,
        stop: threading.Event,
    ) -> None:
        self.corpus, self.config, self.run_dir = corpus, config, run_dir
        torch.manual_seed(config.seed)  # a new head starts the same on every run
        (model, info), self.tokenizer = load_pretrained(
            config, "AutoModelForMaskedLM", output_loading_info=True
        )
        self.new_head = missing_head(model, list(info["missing_keys"]))
        if self.new_head and not config.init_mlm_head:
            raise refuse_headless(config.model, self.new_head)
        if config.whole_word_mask and not self.tokenizer.is_fast:
            raise ConfigError(
                f"needs a fast tokenizer (its character offsets find the words); {config.model} "
                "has none",
                field="whole_word_mask",
            )
        self.model = model
        self.max_length = resolve_max_length(model.base_model, self.tokenizer, config.max_length)
        self.batch_size = config.blocks_per_batch(self.max_length)
        segmenter = Segmenter(config.lang, config.spacy_model)  # re-read every pass
        parts = (corpus, segmenter, self.tokenizer, self.max_length, config.eval_fraction)
        offsets = config.whole_word_mask
        self.train_blocks = SentenceBlocks(*parts, offsets=offsets)
        self.eval_blocks = SentenceBlocks(*parts, held_out_part=True, offsets=offsets)
        self.steps = config.max_steps or self._steps_for_epochs()
        self.report, self.stop = _Report(progress, stop), stop

    def record(self) -> dict[str, Any]:
        """What ``finetune.json`` says before the run ends: options, base model, head."""
        embeddings = self.model.get_input_embeddings().weight
        output = self.model.get_output_embeddings()
        return {
            "config": self.config.to_dict(),
            "base_model": {
                "name": self.config.model,
                "architecture": type(self.model).__name__,
                **model_fingerprint(self.config.model, self.model),
            },
            "mlm_head": {
                "new": bool(self.new_head),
                "initialized_weights": self.new_head,
                "tied_to_input_embeddings": output is not None
                and output.weight.data_ptr() == embeddings.data_ptr(),
            },
            "max_length": self.max_length,
            "blocks_per_step": self.batch_size,
            "steps_planned": self.steps,
        }

    def run(
        self, checkpoint: Path | None, begin: Callable[[], None] | None = None
    ) -> dict[str, Any]:
        """Train (continuing from ``checkpoint`` if given); the full record.

        ``begin`` is called once the model is loaded and the first perplexity measured, just
        before training starts.
        """
        trainer = self._trainer()
        before = self._held_out_loss(trainer)
        if isinstance(self.stop, StopRequest):
            self.stop.nothing_to_lose = False  # from now on a stop saves a checkpoint
        if begin is not None:
            begin()
        self.report.started = time.perf_counter()
        self.report.earlier = _seconds_saved(checkpoint)
        result = trainer.train(
            resume_from_checkpoint=None if checkpoint is None else str(checkpoint)
        )
        if self.report.stopped:
            raise Interrupted(
                f"interrupted at step {trainer.state.global_step}: checkpoint saved; "
                f"continue with --resume {self.run_dir.parent}"
            )
        seconds = self.report.seconds()
        after = self._held_out_loss(trainer)
        tokens = int(getattr(trainer.state, "num_input_tokens_seen", 0) or 0)
        return {
            **self.record(),
            "steps": trainer.state.global_step,
            "tokens_seen": tokens,
            "train_loss": result.training_loss,
            "seconds": seconds,
            "held_out": {
                "fraction": self.config.eval_fraction,
                "perplexity_before": perplexity(before),
                "perplexity_after": perplexity(after),
            },
        }

    def save(self, folder: Path) -> None:
        """The model (safetensors) and tokenizer, ready for ``distill --model folder``."""
        self.model.save_pretrained(folder, safe_serialization=True)
        self.tokenizer.save_pretrained(folder)

    def _trainer(self) -> Trainer:
        config = self.config
        device = resolve_device(config.device)
        cuda = device.type == "cuda"
        args = TrainingArguments(
            output_dir=str(self.run_dir),
            max_steps=self.steps,
            per_device_train_batch_size=self.batch_size,
            per_device_eval_batch_size=self.batch_size,
            learning_rate=config.learning_rate,
            warmup_steps=int(config.warmup_ratio * self.steps),
            seed=config.seed,
            save_strategy="steps",
            save_steps=config.save_every,
            save_total_limit=1,
            logging_steps=1,
            report_to=[],
            disable_tqdm=True,
            use_cpu=device.type == "cpu",
            bf16=cuda and config.dtype in ("auto", "bfloat16"),
            fp16=cuda and config.dtype == "float16",
            include_num_input_tokens_seen=True,
            dataloader_num_workers=0,
            remove_unused_columns=False,  # whole-word masking reads the blocks' offset_mapping
        )
        self.collator = SeededMasking(
            masking_collator(self.tokenizer, config.mlm_probability, config.whole_word_mask),
            config.seed,
        )
        trainer = Trainer(
            model=self.model,
            args=args,
            train_dataset=self.train_blocks,
            data_collator=self.collator,
            callbacks=[self.report],
        )
        trainer.remove_callback(PrinterCallback)  # the library never prints; progress reports
        return trainer

    def _held_out_loss(self, trainer: Trainer) -> float | None:
        """Mean masked-LM loss on the held-out blocks, with the same masks every time."""
        if self.config.eval_fraction == 0 or next(iter(self.eval_blocks), None) is None:
            return None
        calls, self.collator.calls = self.collator.calls, 0  # the same masks every time
        metrics = trainer.evaluate(self.eval_blocks)
        self.collator.calls = calls
        return float(metrics["eval_loss"])

    def _steps_for_epochs(self) -> int:
        """Optimizer steps of ``config.epochs`` passes (one extra pass counts the blocks)."""
        blocks = sum(1 for _ in self.train_blocks)
        if blocks == 0:
            raise CorpusError(f"{self.corpus}: holds no training sentences")
        return max(1, math.ceil(blocks * self.config.epochs / self.batch_size))


def perplexity(loss: float | None) -> float | None:
    """``exp(loss)``, or None when there was nothing to evaluate."""
    return None if loss is None or math.isnan(loss) else math.exp(min(loss, 50.0))


def missing_head(model: Any, missing_keys: list[str]) -> list[str]:
    """The masked-LM head weights that were not in the checkpoint (newly initialized)."""
    prefix = model.base_model_prefix + "."
    return sorted(k for k in missing_keys if not k.startswith(prefix))


def refuse_headless(name: str, missing: list[str]) -> ModelLoadError:
    """The one-line error for a model without masked-LM head weights."""
    return ModelLoadError(
        f"{name}: has no masked-LM head ({len(missing)} head weights missing); pass "
        "--init-mlm-head to train a new one"
    )
