"""One batch through the encoder into the sums, with the encoder side's counters."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..config import DistillConfig
from ..model.batches import Batch
from ..model.encoder import Encoder
from ..model.pooling import Accumulator
from .stats import RunStats


def encode(encoder: Encoder, batch: Batch, stats: RunStats) -> Any:
    """The batch's hidden states; a batch the encoder ran again in float32 is counted."""
    before = encoder.float32_recomputes
    hidden = encoder.hidden_states(batch)
    stats.batches_recomputed_float32 += encoder.float32_recomputes - before
    return hidden


def accumulate(
    hidden: Any, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Add one batch's hidden states at its occurrences, and count its tokens."""
    accumulator.add(hidden, batch, config.pool, config.combine)
    stats.batches += 1
    stats.tokens += batch.real_tokens
    stats.padded_tokens += int(batch.input_ids.size)


def accumulate_rows(
    hidden: Any,
    batch: Batch,
    rows: np.ndarray,
    accumulator: Accumulator,
    config: DistillConfig,
    stats: RunStats,
) -> None:
    """Add the occurrences of some ``rows`` of a batch, and count those rows' tokens.

    The batch itself is not counted: a batch pooled from several shards' inputs is summed a
    shard's rows at a time, and counted once.
    """
    accumulator.add(hidden, batch.of_rows(rows), config.pool, config.combine)
    stats.tokens += int(batch.attention_mask[rows].sum())
    stats.padded_tokens += len(rows) * batch.input_ids.shape[1]


def add_batch(
    encoder: Encoder, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Run the encoder on one batch and accumulate its occurrences."""
    accumulate(encode(encoder, batch, stats), batch, accumulator, config, stats)
