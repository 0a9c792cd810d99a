"""Pool each occurrence's subwords, combine layers, and sum per entry on the device (float64)."""

from __future__ import annotations

import numpy as np
import torch

from ..config import Combine, Pooling
from .batches import Batch
from .encoder import to_device


def pool_occurrences(
    hidden: torch.Tensor,
    rows: torch.Tensor,
    starts: torch.Tensor,
    ends: torch.Tensor,
    pool: Pooling,
) -> torch.Tensor:
    """Pool the subword vectors of each occurrence.

    Args:
        hidden: ``[layers, batch, tokens, hidden]`` states.
        rows: Batch row of each occurrence.
        starts: First token of each occurrence.
        ends: End (exclusive) token of each occurrence.
        pool: ``mean``, ``first``, ``last`` or ``max``.

    Returns:
        ``[layers, occurrences, hidden]``.

    """
    if pool == "first":
        return hidden[:, rows, starts]
    if pool == "last":
        return hidden[:, rows, ends - 1]
    lengths = ends - starts
    owner = torch.repeat_interleave(torch.arange(len(rows), device=rows.device), lengths)
    first_of_owner = torch.cumsum(lengths, 0) - lengths
    positions = starts[owner] + torch.arange(len(owner), device=rows.device) - first_of_owner[owner]
    tokens = hidden[:, rows[owner], positions]
    pooled = hidden.new_zeros(hidden.shape[0], len(rows), hidden.shape[-1])
    if pool == "max":
        index = owner[None, :, None].expand_as(tokens)
        return pooled.scatter_reduce_(1, index, tokens, "amax", include_self=False)
    return pooled.index_add_(1, owner, tokens) / lengths[None, :, None].to(hidden.dtype)


def combine_layers(pooled: torch.Tensor, combine: Combine) -> torch.Tensor:
    """``[layers, n, hidden]`` to ``[n, dim]`` by ``mean``, ``sum`` or ``concat`` over layers."""
    if combine == "mean":
        return pooled.mean(0)
    if combine == "sum":
        return pooled.sum(0)
    return pooled.permute(1, 0, 2).reshape(pooled.shape[1], -1)


class Accumulator:
    """Running sums and counts of occurrence vectors per entry.

    Args:
        n_entries: Vocabulary size.
        dim: Width of one occurrence vector.
        device: Where the sums live (the encoder's device).

    """

    def __init__(self, n_entries: int, dim: int, device: torch.device | str = "cpu") -> None:
        device = torch.device(device)
        # float64, so sums merged from shards or encoders in any grouping agree to ~1e-16; MPS
        # has no float64.
        dtype = torch.float32 if device.type == "mps" else torch.float64
        self.sums = torch.zeros(n_entries, dim, dtype=dtype, device=device)
        self.counts = torch.zeros(n_entries, dtype=torch.int64, device=device)

    @staticmethod
    def bytes_needed(n_entries: int, dim: int) -> int:
        """Memory of the float64 sums and int64 counts of ``n_entries`` vectors of width ``dim``."""
        return n_entries * (dim * 8 + 8)

    def restore(self, sums: np.ndarray, counts: np.ndarray) -> None:
        """Go on from saved ``[entries, dim]`` sums and ``[entries]`` counts."""
        self.sums.copy_(torch.from_numpy(sums).to(self.sums.device))
        self.counts.copy_(torch.from_numpy(counts).to(self.counts.device))

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """The sums (float64) and counts, as numpy: a value that adds up across accumulators."""
        return self.sums.cpu().double().numpy(), self.counts.cpu().numpy()

    def add(self, hidden: torch.Tensor, batch: Batch, pool: Pooling, combine: Combine) -> None:
        """Add the occurrences of one batch, given its ``[layers, B, T, H]`` hidden states."""
        rows, starts, ends, entries = (
            to_device(a, hidden.device)
            for a in (batch.rows, batch.starts, batch.ends, batch.entries)
        )
        vectors = combine_layers(pool_occurrences(hidden, rows, starts, ends, pool), combine)
        self.sums.index_add_(0, entries, vectors.to(self.sums.dtype))
        self.counts.index_add_(0, entries, torch.ones_like(entries))

    def means(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean vector (zeros where unseen) and count per entry, as numpy."""
        return mean_vectors(*self.state())


def mean_vectors(sums: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float32 means of summed vectors (zeros where the count is 0), and the counts."""
    return (sums / np.maximum(counts, 1)[:, None]).astype(np.float32), counts
