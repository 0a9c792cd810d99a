"""One batch through the encoder into the sums, with the encoder side's counters."""

from __future__ import annotations

from typing import Any

from ..config import DistillConfig
from ..model.batches import Batch
from ..model.encoder import Encoded, Encoder
from ..model.pooling import Accumulator, occurrence_vectors
from .stats import RunStats


def checked_vectors(encoded: Encoded, config: DistillConfig, stats: RunStats) -> Any:
    """``[occurrences, dim]``: the batch's occurrence vectors, pooled and combined.

    The batch's one wait for the device is here, once its pooling is queued: whether its
    half-precision states overflowed. Such a batch is run again in float32 (and counted), so
    nothing of an overflow reaches the sums.
    """
    occurrences = encoded.occurrences
    vectors = occurrence_vectors(encoded.states, occurrences, config.pool, config.combine)
    if encoded.overflowed():
        vectors = occurrence_vectors(encoded.rerun(), occurrences, config.pool, config.combine)
        stats.batches_recomputed_float32 += 1
    return vectors


def accumulate(
    encoded: Encoded, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Add one batch's hidden states at its occurrences, and count its tokens."""
    accumulator.add(checked_vectors(encoded, config, stats), encoded.occurrences.entries)
    stats.batches += 1
    stats.tokens += batch.real_tokens
    stats.padded_tokens += int(batch.input_ids.size)


def add_batch(
    encoder: Encoder, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Run the encoder on one batch and accumulate its occurrences."""
    accumulate(encoder.encode(batch), batch, accumulator, config, stats)
