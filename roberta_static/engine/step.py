"""One batch through the encoder into the sums, with the encoder side's counters."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..config import DistillConfig
from ..model.batches import Batch, BatchTargets
from ..model.encoder import Encoded, Encoder
from ..model.pooling import Accumulator, occurrence_vectors
from ..model.teacher import TeacherPooling, batch_sentence_vectors
from ..vectors.targets import SentenceTargets
from .heap import trim_heap
from .stats import RunStats


def accumulate(
    encoded: Encoded,
    batch: Batch,
    accumulator: Accumulator,
    config: DistillConfig,
    stats: RunStats,
    targets: SentenceTargets | None = None,
) -> None:
    """Add one batch's hidden states at its occurrences, and count its tokens.

    The batch's one wait for the device is here, once its pooling is queued: whether its
    half-precision states overflowed. Such a batch is run again in float32 (and counted), so
    nothing of an overflow reaches the sums. With ``targets``, the batch's sentences that may be
    targets are offered to it with the teacher's vector of each.
    """
    states, occurrences = encoded.states, encoded.occurrences
    pool, combine = config.pool, config.combine
    vectors = occurrence_vectors(states[: encoded.chosen], occurrences, pool, combine)
    if encoded.overflowed():
        states = encoded.rerun()
        vectors = occurrence_vectors(states[: encoded.chosen], occurrences, pool, combine)
        stats.batches_recomputed_float32 += 1
    accumulator.add(vectors, occurrences.entries)
    if targets is not None and batch.targets is not None and encoded.last is not None:
        offer_targets(states[encoded.last], batch, batch.targets, targets)
    stats.batches += 1
    stats.tokens += batch.real_tokens
    stats.padded_tokens += int(batch.input_ids.size)
    trim_heap()


def offer_targets(last: Any, batch: Batch, held: BatchTargets, targets: SentenceTargets) -> None:
    """Offer the batch's target sentences that may enter ``targets``, with the teacher's vectors.

    ``last``: the batch's last-layer states, a ``[batch, tokens, hidden]`` tensor.
    """
    chosen = np.flatnonzero(targets.wanted(held.keys))
    if not len(chosen):
        return
    pooling = TeacherPooling(**targets.pooling)
    vectors = batch_sentence_vectors(last, batch.attention_mask, held.rows[chosen], pooling)
    starts, ends = held.indptr[chosen], held.indptr[chosen + 1]
    picked = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends, strict=True)])
    indptr = np.concatenate([[0], np.cumsum(ends - starts)])
    targets.add(held.keys[chosen], vectors, indptr, held.entries[picked], held.counts[picked])


def add_batch(
    encoder: Encoder, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Run the encoder on one batch and accumulate its occurrences."""
    accumulate(encoder.encode(batch), batch, accumulator, config, stats)
