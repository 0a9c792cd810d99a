"""One batch through the encoder into the sums, and its tokens counted."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..config import DistillConfig
from ..model.batches import Batch
from ..model.encoder import Encoder
from ..model.pooling import Accumulator
from .stats import RunStats


def torch_from(array: np.ndarray, like: Any) -> Any:
    """A numpy array as a tensor on the device of ``like``."""
    import torch

    return torch.from_numpy(array).to(like.device)


def add_batch(
    encoder: Encoder, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Run the encoder on one batch and accumulate its occurrences."""
    accumulate(encoder.hidden_states(batch), batch, accumulator, config, stats)


def accumulate(
    hidden: Any, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Add one batch's hidden states at its occurrences, and count its tokens."""
    accumulator.add(hidden, batch, config.pool, config.combine)
    stats.tokens += batch.real_tokens
    stats.padded_tokens += int(batch.input_ids.size)
