"""Pool each occurrence's subwords, combine layers, and sum per entry on the device (float64)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..config import Combine, Pooling
from .batches import Batch


@dataclass
class Occurrences:
    """A batch's occurrences on the device, and where each of their subwords is.

    The subwords' indices are computed on the host (:func:`occurrence_arrays`), so pooling asks
    the device nothing (``repeat_interleave`` over lengths on the device would wait for it).

    Attributes:
        rows, starts, ends, entries: One value per occurrence: its batch row, token range, entry.
        owner: One value per subword of an occurrence: the occurrence's number.
        token_rows, token_positions: Where that subword is in the batch.

    """

    rows: torch.Tensor
    starts: torch.Tensor
    ends: torch.Tensor
    entries: torch.Tensor
    owner: torch.Tensor
    token_rows: torch.Tensor
    token_positions: torch.Tensor


def occurrence_arrays(batch: Batch) -> list[np.ndarray]:
    """The host arrays that make a batch's :class:`Occurrences`, in its fields' order."""
    lengths = batch.ends - batch.starts
    owner = np.repeat(np.arange(len(lengths)), lengths)
    first_of_owner = np.cumsum(lengths) - lengths
    positions = batch.starts[owner] + np.arange(len(owner)) - first_of_owner[owner]
    rows = batch.rows
    return [rows, batch.starts, batch.ends, batch.entries, owner, rows[owner], positions]


def pool_occurrences(hidden: torch.Tensor, occurrences: Occurrences, pool: Pooling) -> torch.Tensor:
    """Pool the subword vectors of each occurrence.

    Args:
        hidden: ``[layers, batch, tokens, hidden]`` states.
        occurrences: Where each occurrence and each of its subwords is.
        pool: ``mean``, ``first``, ``last`` or ``max``.

    Returns:
        ``[layers, occurrences, hidden]``.

    """
    o = occurrences
    if pool == "first":
        return hidden[:, o.rows, o.starts]
    if pool == "last":
        return hidden[:, o.rows, o.ends - 1]
    tokens = hidden[:, o.token_rows, o.token_positions]
    pooled = hidden.new_zeros(hidden.shape[0], len(o.rows), hidden.shape[-1])
    if pool == "max":
        index = o.owner[None, :, None].expand_as(tokens)
        return pooled.scatter_reduce_(1, index, tokens, "amax", include_self=False)
    lengths = o.ends - o.starts
    return pooled.index_add_(1, o.owner, tokens) / lengths[None, :, None].to(hidden.dtype)


def occurrence_vectors(
    hidden: torch.Tensor, occurrences: Occurrences, pool: Pooling, combine: Combine
) -> torch.Tensor:
    """``[occurrences, dim]``: each occurrence's subwords pooled per layer, the layers combined."""
    return combine_layers(pool_occurrences(hidden, occurrences, pool), combine)


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

    def restore(self, rows: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> None:
        """Go on from saved sums and counts of the entries ``rows`` (the others: none)."""
        index = torch.from_numpy(rows).to(self.sums.device)
        self.sums.zero_()
        self.counts.zero_()
        self.sums[index] = torch.from_numpy(sums).to(self.sums.device, self.sums.dtype)
        self.counts[index] = torch.from_numpy(counts).to(self.counts.device)

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """The sums (float64) and counts, as numpy: a value that adds up across accumulators."""
        return self.sums.cpu().double().numpy(), self.counts.cpu().numpy()

    def counted(self) -> np.ndarray:
        """Each entry's count so far, as numpy (a copy)."""
        return self.counts.cpu().numpy().copy()

    def sums_of(self, rows: np.ndarray) -> np.ndarray:
        """The float64 sums of the entries ``rows``, as numpy (a copy of those rows only)."""
        return self.sums[torch.from_numpy(rows).to(self.sums.device)].cpu().double().numpy()

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The entries summed since the last take, with their sums and counts; zeroed here."""
        rows = torch.nonzero(self.counts).flatten()
        sums, counts = self.sums[rows].cpu().double().numpy(), self.counts[rows].cpu().numpy()
        self.sums[rows] = 0
        self.counts[rows] = 0
        return rows.cpu().numpy(), sums, counts

    def add(self, vectors: torch.Tensor, entries: torch.Tensor) -> None:
        """Add ``[n, dim]`` occurrence vectors to the sums of their ``entries``, and count them."""
        self.sums.index_add_(0, entries, vectors.to(self.sums.dtype))
        self.counts.index_add_(0, entries, torch.ones_like(entries))

    def means(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean vector (zeros where unseen) and count per entry, as numpy."""
        return mean_vectors(*self.state())


def mean_vectors(sums: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float32 means of summed vectors (zeros where the count is 0), and the counts."""
    return (sums / np.maximum(counts, 1)[:, None]).astype(np.float32), counts
