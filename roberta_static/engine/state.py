"""Where a pass is: input position, contexts left per entry, statistics, batches in hand."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import DistillConfig
from ..model.batches import Batch, EncodeStats
from ..model.encoder import Encoder
from ..model.pooling import Accumulator
from ..text.corpus import START, Position
from .checkpoint import (
    Checkpoint,
)
from .stats import RunStats
from .step import torch_from


@dataclass
class PassState:
    """Where the pass is: input position, contexts left per entry, counters."""

    position: Position
    remaining: np.ndarray
    stats: RunStats
    seconds_before: float = 0.0
    leftover: list[Batch] = field(default_factory=list)

    @classmethod
    def fresh(cls, n_entries: int, config: DistillConfig) -> PassState:
        """The state before a pass reads anything."""
        remaining = np.full(n_entries, contexts_allowed(config), dtype=np.int64)
        return cls(START, remaining, RunStats(entries=n_entries))

    @classmethod
    def restore(cls, saved: Checkpoint, encoder: Encoder, accumulator: Accumulator) -> PassState:
        """A checkpoint's state; its sums and counts go back into ``accumulator``."""
        accumulator.sums.copy_(torch_from(saved.sums, accumulator.sums))
        accumulator.counts.copy_(torch_from(saved.counts, accumulator.counts))
        encoder.subwords.stats = EncodeStats(**saved.encode_stats)
        stats = RunStats(**saved.stats)
        encoder.float32_recomputes = stats.batches_recomputed_float32
        return cls(saved.position, saved.remaining.copy(), stats, stats.seconds, saved.leftover)


def contexts_allowed(config: DistillConfig) -> int:
    """Occurrences each entry may contribute: ``max_contexts``, or all of them when 0."""
    return config.max_contexts or int(np.iinfo(np.int64).max)
