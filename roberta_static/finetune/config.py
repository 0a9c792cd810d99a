"""`FinetuneConfig`: every option of a fine-tuning run, validated before any model loads."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..config import _CHOICES, Device, DType, parse_devices
from ..errors import ConfigError, require_minimums

MINIMUMS = {"max_length": 8, "max_steps": 1, "batch_size": 1, "batch_tokens": 8, "save_every": 1}


# The shares and their ranges, ends included (mlm_probability must be above 0).
SHARES = (("mlm_probability", 0.0, 1.0), ("eval_fraction", 0.0, 0.5), ("warmup_ratio", 0.0, 1.0))
BATCH_SIZE = 8  # blocks per step when neither batch_size nor batch_tokens is given


@dataclass(frozen=True)
class FinetuneConfig:
    """All options of a fine-tuning run; written into ``finetune.json``.

    Args:
        model: Hub id, local folder or short name (``minilm``) of a masked-LM model.
        max_length: Longest training block in tokens (default: the model's limit).
        mlm_probability: Share of tokens (of words, with ``whole_word_mask``) masked.
        whole_word_mask: Mask all the subword tokens of a word together.
        epochs: Passes over the training sentences (ignored when ``max_steps`` is set).
        max_steps: Optimizer steps to take.
        learning_rate: Peak learning rate (AdamW, linear decay after warm-up).
        batch_size: Blocks per optimizer step (default 8).
        batch_tokens: Token budget of one step instead, padding included: as many blocks of
            ``max_length`` tokens as it holds.
        warmup_ratio: Share of the steps spent warming the learning rate up.
        seed: Seed of the masking and of a new head.
        device: ``auto`` picks CUDA, then MPS, then CPU.
        dtype: ``auto`` trains in bfloat16 mixed precision on CUDA, float32 elsewhere.
        eval_fraction: Share of sentences held out to measure perplexity (0 = none).
        save_every: Steps between checkpoints of the run.
        lang: Language of the blank spaCy pipeline that splits sentences.
        spacy_model: An installed spaCy pipeline to segment with instead.
        text_field: Field holding the text in JSONL corpus files.
        init_mlm_head: Start a new masked-LM head when the model has none.
        trust_remote_code: Allow model code from the hub.
        allow_pickle: Allow pickled ``.bin`` weights when no safetensors file exists.

    Example:
        >>> FinetuneConfig(model="roberta-base", max_steps=100).mlm_probability
        0.15

    """

    model: str
    max_length: int | None = None
    mlm_probability: float = 0.15
    whole_word_mask: bool = False
    epochs: float = 1.0
    max_steps: int | None = None
    learning_rate: float = 5e-5
    batch_size: int | None = None
    batch_tokens: int | None = None
    warmup_ratio: float = 0.06
    seed: int = 0
    device: Device = "auto"
    dtype: DType = "auto"
    eval_fraction: float = 0.02
    save_every: int = 500
    lang: str = "en"
    spacy_model: str | None = None
    text_field: str = "text"
    init_mlm_head: bool = False
    trust_remote_code: bool = False
    allow_pickle: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in _CHOICES["dtype"]:
            allowed = ", ".join(_CHOICES["dtype"])
            raise ConfigError(f"expected one of {allowed}, got {self.dtype!r}", "dtype")
        if len(parse_devices(self.device)) > 1:
            raise ConfigError(f"fine-tuning runs on one device, got {self.device!r}", "device")
        require_minimums(self, MINIMUMS)
        self._require_shares()
        if None not in (self.batch_size, self.batch_tokens):
            raise ConfigError(
                "cannot be combined with a batch size: pass one of the two", field="batch_tokens"
            )
        if self.max_length is not None:
            self.blocks_per_batch(self.max_length)
        if not self.epochs > 0:
            raise ConfigError(f"must be > 0, got {self.epochs}", field="epochs")
        if not self.learning_rate > 0:
            raise ConfigError(f"must be > 0, got {self.learning_rate}", field="learning_rate")

    def _require_shares(self) -> None:
        """Raise :class:`ConfigError` for the first share outside its range."""
        for name, low, high in SHARES:
            value = getattr(self, name)
            if not low <= value <= high or (name == "mlm_probability" and value == 0):
                opening = "(" if name == "mlm_probability" else "["
                raise ConfigError(f"must be in {opening}{low}, {high}], got {value}", field=name)

    def blocks_per_batch(self, max_length: int) -> int:
        """Blocks per optimizer step, when blocks hold at most ``max_length`` tokens.

        Example:
            >>> FinetuneConfig("m", batch_tokens=1000).blocks_per_batch(128)
            7

        """
        if self.batch_tokens is None:
            return BATCH_SIZE if self.batch_size is None else self.batch_size
        if self.batch_tokens < max_length:
            raise ConfigError(
                f"must hold one block of the longest input ({max_length} tokens), "
                f"got {self.batch_tokens}",
                field="batch_tokens",
            )
        return self.batch_tokens // max_length

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; ``FinetuneConfig(**d)`` reads it back."""
        return dataclasses.asdict(self)
