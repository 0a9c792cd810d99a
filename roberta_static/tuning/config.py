"""`TuneConfig`: every option of a ``tune`` run, validated before anything is read."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..config import parse_devices
from ..errors import ConfigError, require_minimums
from ..vectors.docvectors import DocWeighting

TuneLoss = Literal["mse", "cosine"]
LOSSES: tuple[str, ...] = get_args(TuneLoss)
TuneHead = Literal["fold", "drop"]
HEADS: tuple[str, ...] = get_args(TuneHead)
MINIMUMS = {"max_epochs": 1, "patience": 1, "batch_size": 1, "max_held_out": 1, "seed": 0}
MIN_SENTENCES = 10  # fewer leave no held-out split worth the name


@dataclass(frozen=True)
class TuneConfig:
    """All options of a ``tune`` run; written into the tuned folder's ``meta.json``.

    Training starts from the untuned vectors with ``remove_top_pcs`` top components removed (none
    by default), each weighing 1 or, with ``sif_coefficient``, its SIF weight (with 4 and 1e-3,
    what ``doc_vector = "weighted"`` computes for the untuned vectors). A linear head maps a
    sentence's weighted mean to the teacher's width; it starts as the least-squares fit of the
    targets and, at the end, is folded into the vectors (``head="fold"``) or dropped.

    The choices (loss, step size, the head's start, the start's components and weights) were
    measured against tokenlearn's; ``docs/benchmarks/tune.md`` has the figures. The batch size and
    the held-out share are tokenlearn's.

    Args:
        loss: ``cosine`` (1 - the cosine of the head's output and the teacher's vector) or
            ``mse`` (their mean squared difference, tokenlearn's).
        learning_rate: Adam's step size for the vectors, the weights and the head.
        batch_size: Sentences per step.
        max_epochs: Passes over the training sentences at most.
        patience: Epochs without a better held-out loss before training stops; the best
            epoch's vectors are kept.
        held_out: Share of the sentences held out to measure the loss (at most
            ``max_held_out`` of them).
        max_held_out: The most sentences held out.
        remove_top_pcs: Top principal components removed from the vectors before training.
        sif_coefficient: ``a`` of the SIF weights the training starts from; ``None``: every
            weight starts at 1.
        seed: Seed of the split and the order of the sentences.
        head: ``fold``: the tuned vectors are the head's matrix times the trained ones, and the
            head's bias is their ``offset``, so a text's weighted mean is what the head gives, in
            the teacher's space; ``drop``: the trained vectors as they are, without the head
            (tokenlearn's choice).
        device: ``auto`` picks CUDA, then MPS, then CPU; or ``cpu``, ``cuda``, ``cuda:1``, ``mps``.

    Example:
        >>> TuneConfig(seed=3).learning_rate
        0.0003

    """

    loss: TuneLoss = "cosine"
    learning_rate: float = 3e-4
    batch_size: int = 256
    max_epochs: int = 100
    patience: int = 10
    held_out: float = 0.1
    max_held_out: int = 10_000
    remove_top_pcs: int = 0
    sif_coefficient: float | None = None
    seed: int = 0
    head: TuneHead = "fold"
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ConfigError(f"expected one of {', '.join(LOSSES)}, got {self.loss!r}", "loss")
        if self.head not in HEADS:
            raise ConfigError(f"expected one of {', '.join(HEADS)}, got {self.head!r}", "head")
        require_minimums(self, MINIMUMS)
        if not self.learning_rate > 0:
            raise ConfigError(f"must be > 0, got {self.learning_rate}", field="learning_rate")
        if not 0 < self.held_out <= 0.5:
            raise ConfigError(f"must be in (0, 0.5], got {self.held_out}", field="held_out")
        DocWeighting.check(self.remove_top_pcs, self.sif_coefficient)
        if len(parse_devices(self.device)) != 1:
            raise ConfigError(f"tune runs on one device, got {self.device!r}", field="device")

    def held_out_count(self, sentences: int) -> int:
        """How many of ``sentences`` are held out.

        Raises:
            ConfigError: Too few sentences to hold any out and train on the rest.

        Example:
            >>> TuneConfig().held_out_count(1_000)
            100

        """
        count = min(self.max_held_out, int(sentences * self.held_out))
        if sentences < MIN_SENTENCES or count < 1:
            needed, plural = max(MIN_SENTENCES, math.ceil(1 / self.held_out)), sentences != 1
            raise ConfigError(
                f"{sentences:,} sentence{'s' if plural else ''} with vocabulary entries are too "
                f"few for a held-out split (at least {needed} needed); "
                "keep more sentence targets"
            )
        return count

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; ``TuneConfig(**d)`` reads it back."""
        return dataclasses.asdict(self)
