"""One batch through the encoder into the sums, with the encoder side's counters."""

from __future__ import annotations

from ..config import DistillConfig
from ..model.batches import Batch
from ..model.encoder import Encoded, Encoder
from ..model.pooling import Accumulator, occurrence_vectors
from .stats import RunStats


def encode(encoder: Encoder, batch: Batch, stats: RunStats) -> Encoded:
    """The batch's hidden states, queued on the device (``stats`` are counted by accumulate)."""
    return encoder.encode(batch)


def accumulate(
    encoded: Encoded, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Add one batch's hidden states at its occurrences, and count its tokens.

    The batch's one wait for the device is here, once its pooling is queued: whether its
    half-precision states overflowed. Such a batch is run again in float32 (and counted) before
    anything of it reaches the sums.
    """
    occurrences = encoded.occurrences
    vectors = occurrence_vectors(encoded.states, occurrences, config.pool, config.combine)
    if encoded.overflowed():
        vectors = occurrence_vectors(encoded.rerun(), occurrences, config.pool, config.combine)
        stats.batches_recomputed_float32 += 1
    accumulator.add(vectors, occurrences.entries)
    stats.batches += 1
    stats.tokens += batch.real_tokens
    stats.padded_tokens += int(batch.input_ids.size)


def add_batch(
    encoder: Encoder, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Run the encoder on one batch and accumulate its occurrences."""
    accumulate(encode(encoder, batch, stats), batch, accumulator, config, stats)
