"""The state of a pass: one value that a checkpoint saves and that shards' results merge into.

A pass reads the corpus as shards (one shard, the whole corpus, in one process). Each shard's
:class:`ShardState` says where reading resumes, the occurrences each entry may still take there,
the producer's counters and the batches read but not yet summed. A :class:`PassState` adds the
float64 sums and counts of the entries seen, and the encoder's counters. Merging the states of
consecutive parts of a pass, in corpus order, gives the state of the whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..config import DistillConfig
from ..model.batches import EncoderInput
from ..progress import Work
from ..text.corpus import Position, is_compressed
from ..text.shards import Shard
from .stats import RunStats


@dataclass
class ShardState:
    """How far a pass has got in one shard.

    Attributes:
        shard: The units it spans.
        position: Where reading resumes.
        remaining: Occurrences each entry may still take in this shard.
        quota: Occurrences each entry could take in it at the start (``max_contexts``' share).
        stats: The producer's counters for the part read.
        done: Whether the shard is read to its end (or to where the pass stops early).
        may_stop_early: Whether reading may end inside the shard once no entry may take more.
        leftover: Encoder inputs of the part read that are not summed yet.

    """

    shard: Shard
    position: Position
    remaining: np.ndarray
    quota: np.ndarray
    stats: RunStats = field(default_factory=RunStats)
    done: bool = False
    may_stop_early: bool = True
    leftover: list[EncoderInput] = field(default_factory=list)

    @classmethod
    def fresh(
        cls, shard: Shard, quota: np.ndarray, may_stop_early: bool = True, skipped: bool = False
    ) -> ShardState:
        """A shard before it is read; a ``skipped`` one lies past where the pass stops."""
        quota = quota.astype(np.int64)
        return cls(
            shard,
            shard.start,
            quota.copy(),
            quota,
            RunStats(stopped_early=skipped),
            done=skipped,
            may_stop_early=may_stop_early,
        )

    def snapshot(self) -> ShardState:
        """A copy the pass can go on changing this one after (no leftover)."""
        copy = replace(self.stats)
        return replace(self, remaining=self.remaining.copy(), stats=copy, leftover=[])

    def bytes_done(self, files: list[Path]) -> int:
        """Bytes of the shard read so far (a shard skipped, or not begun: 0)."""
        start, end = self.shard.byte_range(files)
        if self.done and not self.stats.stopped_early:
            return end - start
        return min(max(0, bytes_before(files, self.position) - start), end - start)

    def work(self, files: list[Path]) -> Work:
        """The bytes and sentences of the shard done."""
        return Work(self.bytes_done(files), self.stats.sentences)

    @property
    def pending(self) -> bool:
        """Whether the pass still has something to do here: read on, or sum its leftover."""
        return not self.done or bool(self.leftover)


@dataclass
class PassState:
    """Sums and counts of the entries seen, counters, and each shard's state.

    The sums are kept for the entries seen only (``rows``, ascending), so a shard's state is as
    small as what it holds.

    Attributes:
        rows: The entries with a count, ascending.
        sums: Float64 sums of their occurrence vectors, ``[len(rows), dim]``.
        counts: Their occurrences summed.
        stats: The encoder side's counters (tokens, padded tokens, float32 re-runs) and the
            seconds of the runs before.
        shards: The shards, in corpus order.

    """

    rows: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    stats: RunStats = field(default_factory=RunStats)
    shards: list[ShardState] = field(default_factory=list)

    @classmethod
    def of_sums(
        cls,
        sums: np.ndarray,
        counts: np.ndarray,
        stats: RunStats | None = None,
        shards: list[ShardState] | None = None,
    ) -> PassState:
        """The state holding dense ``[entries, dim]`` sums and ``[entries]`` counts."""
        rows = np.flatnonzero(counts)
        return cls(rows, sums[rows], counts[rows], stats or RunStats(), shards or [])

    @classmethod
    def empty(cls, dim: int, shards: list[ShardState] | None = None) -> PassState:
        """Nothing summed yet."""
        none = np.zeros(0, dtype=np.int64)
        return cls(none, np.zeros((0, dim)), none.copy(), RunStats(), shards or [])

    def merge(self, later: PassState) -> PassState:
        """The state of this part of a pass followed by ``later``: sums and counters add up."""
        rows = np.union1d(self.rows, later.rows)
        sums = np.zeros((len(rows), self.sums.shape[1]))
        counts = np.zeros(len(rows), dtype=np.int64)
        for part in (self, later):
            at = np.searchsorted(rows, part.rows)
            sums[at] += part.sums
            counts[at] += part.counts
        stats = RunStats.merged([self.stats, later.stats])
        return PassState(rows, sums, counts, stats, self.shards + later.shards)

    def dense(self, entries: int) -> tuple[np.ndarray, np.ndarray]:
        """``[entries, dim]`` sums and ``[entries]`` counts."""
        sums = np.zeros((entries, self.sums.shape[1]))
        counts = np.zeros(entries, dtype=np.int64)
        sums[self.rows] = self.sums
        counts[self.rows] = self.counts
        return sums, counts

    def means(self, entries: int) -> tuple[np.ndarray, np.ndarray]:
        """Float32 mean vector (zeros where unseen) and count per entry."""
        sums, counts = self.dense(entries)
        return (sums / np.maximum(counts, 1)[:, None]).astype(np.float32), counts

    def run_stats(self) -> RunStats:
        """Every counter of the pass: the shards' in corpus order, then the encoder side's."""
        return RunStats.merged([*(shard.stats for shard in self.shards), self.stats])

    def occurring(self, entries: int) -> np.ndarray:
        """Which entries occur in the part read (whether or not the encoder could read them)."""
        taken = np.zeros(entries, dtype=np.int64)
        for shard in self.shards:
            taken += shard.quota - shard.remaining
        return taken > 0

    def work(self, files: list[Path]) -> Work:
        """Bytes and sentences done over all shards."""
        return sum((shard.work(files) for shard in self.shards), Work())

    def read_up_to(self, files: int) -> Position:
        """The part of a corpus of ``files`` files that a resume needs unchanged.

        All of it once it is cut into shards (the cuts are byte offsets); in one shard, the part
        read.
        """
        if len(self.shards) != 1:
            return Position(files, 0, 1, 0)
        return self.shards[0].position


def contexts_allowed(config: DistillConfig) -> int:
    """Occurrences each entry may contribute: ``max_contexts``, or all of them when 0."""
    return config.max_contexts or int(np.iinfo(np.int64).max)


def bytes_before(files: list[Path], position: Position) -> int:
    """Corpus bytes before ``position`` (inside a compressed file: before the file)."""
    done = sum(path.stat().st_size for path in files[: position.file])
    if position.file < len(files) and not is_compressed(files[position.file]):
        done += position.offset
    return done
