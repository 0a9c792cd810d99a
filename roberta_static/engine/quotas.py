"""``max_contexts`` across shards: each entry's first N occurrences in corpus order, and no more.

Shards read at the same time cannot know what the shards before them take, so a pass with
``max_contexts`` over several shards counts each shard's occurrences first (segmenting and
matching, no subword tokenizing), in shard order, and a shard is read once every shard before it
is counted. Counting keeps what it read (:mod:`.reading`), so reading the shard then replays it.
For each entry the :class:`QuotaPlan` keeps the shard where its first N occurrences end and how
many of them fall there: a shard before that one may take all of the entry's occurrences, that
shard the rest, a later one none. The plan is a few arrays over the vocabulary, whatever the
number of shards.

A pass in one shard needs no counting: it takes N of each entry and stops reading once every entry
has its N. A pass over several shards stops at the same place: the shard holding the last entry's
N-th occurrence stops there, and the shards after it are never read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NEVER = np.iinfo(np.int64).max  # "no shard": an entry that has not reached its N; no limit


@dataclass(frozen=True)
class EntryCounts:
    """Occurrences per entry, for the entries that have some (``entries`` ascending)."""

    entries: np.ndarray
    counts: np.ndarray

    @classmethod
    def none(cls) -> EntryCounts:
        """No occurrence."""
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    @classmethod
    def of(cls, entries: np.ndarray | list[int]) -> EntryCounts:
        """The counts of a list of entry ids (one per occurrence)."""
        found, counts = np.unique(np.asarray(entries, dtype=np.int64), return_counts=True)
        return cls(found, counts.astype(np.int64))

    def __add__(self, other: EntryCounts) -> EntryCounts:
        entries = np.union1d(self.entries, other.entries)
        counts = np.zeros(len(entries), dtype=np.int64)
        for part in (self, other):
            counts[np.searchsorted(entries, part.entries)] += part.counts
        return EntryCounts(entries, counts)

    def __len__(self) -> int:
        return len(self.entries)

    def dense(self, size: int) -> np.ndarray:
        """The counts of all ``size`` entries."""
        counts = np.zeros(size, dtype=np.int64)
        counts[self.entries] = self.counts
        return counts


@dataclass
class QuotaPlan:
    """Which occurrences each shard may take, from the counts of the shards before it.

    Attributes:
        limit: N, the occurrences each entry may contribute.
        reached_in: Per entry, the shard holding its N-th occurrence (``NEVER`` while the shards
            counted hold fewer).
        last_quota: Per entry, its occurrences that the shard ``reached_in`` may take.
        before: Per entry, its occurrences in the shards counted, up to the one holding its N-th
            (later shards need not count an entry that has its N).
        counted: How many shards are counted, from the first.

    """

    limit: int
    reached_in: np.ndarray
    last_quota: np.ndarray
    before: np.ndarray
    counted: int = 0

    @classmethod
    def fresh(cls, entries: int, limit: int) -> QuotaPlan:
        """No shard counted yet."""
        zeros = np.zeros(entries, dtype=np.int64)
        return cls(limit, np.full(entries, NEVER), zeros, zeros.copy())

    def add(self, counts: EntryCounts) -> None:
        """Count the next shard (``counted``)."""
        open_entries = self.before < self.limit
        after = self.before.copy()
        after[counts.entries] += counts.counts
        after[~open_entries] = self.before[~open_entries]
        reached = open_entries & (after >= self.limit)
        self.reached_in[reached] = self.counted
        self.last_quota[reached] = self.limit - self.before[reached]
        self.before = after
        self.counted += 1

    def allowance(self, shard: int) -> np.ndarray:
        """Per entry, the occurrences ``shard`` may take (``NEVER``: all of them).

        Needs every shard before it counted (``shard <= counted``).
        """
        if shard > self.counted:
            raise ValueError(f"shard {shard} is not planned: {self.counted} shards counted")
        if shard == self.counted:  # the shards before it leave ``limit - before`` to take
            return np.where(self.reached_in < shard, 0, self.limit - self.before)
        allowed = np.where(self.reached_in == shard, self.last_quota, NEVER)
        allowed[self.reached_in < shard] = 0
        return allowed

    def exhausted(self) -> np.ndarray:
        """Per entry, whether the shards counted hold its N: a later shard takes none of it."""
        return self.reached_in != NEVER

    def last_shard_read(self) -> int | None:
        """The shard where every entry has had its N, if the shards counted hold it."""
        last = int(self.reached_in.max(initial=0))
        return None if last == NEVER else last


class Allowance:
    """What a shard may still take of each entry, counted down as its producer takes them.

    ``None`` as the allowance: every occurrence, with nothing to count down.
    """

    def __init__(self, allowance: np.ndarray | None, taken: EntryCounts) -> None:
        self.remaining = None if allowance is None else allowance.copy()
        if self.remaining is not None:
            self.remaining[taken.entries] -= taken.counts
            # Entries that may take more: the shard may stop reading once there are none.
            self.open = int(np.count_nonzero(self.remaining))

    def take(self, spans: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """Keep the occurrences whose entry may take more, counting them down."""
        remaining = self.remaining
        if remaining is None:
            return spans
        kept = []
        for span in spans:
            entry = span[2]
            if remaining[entry] > 0:
                remaining[entry] -= 1
                self.open -= remaining[entry] == 0
                kept.append(span)
        return kept

    @property
    def exhausted(self) -> bool:
        """Whether no entry may take more here: reading can stop."""
        return self.remaining is not None and self.open == 0
