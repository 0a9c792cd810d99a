"""The state of a pass: one value that a checkpoint saves and any engine resumes.

A pass reads the corpus as shards (one shard, the whole corpus, in one process). Each shard's
:class:`ShardState` says where reading resumes, the occurrences taken there so far, the
producer's counters and the inputs read but not yet summed. A :class:`PassState` adds the float64
sums and counts of the entries seen, the encoder's counters and, with ``max_contexts``, the
:class:`~.quotas.QuotaPlan`. Nothing in it is per shard and per entry: a shard holds the entries
that occur in it, and only while it is being read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..model.batches import EncoderInput
from ..progress import Work
from ..text.corpus import Corpus, Position, TextCorpus
from ..text.shards import Shard
from ..vectors.targets import SentenceTargets
from .quotas import EntryCounts, QuotaPlan
from .stats import RunStats


@dataclass
class ShardState:
    """How far a pass has got in one shard.

    Attributes:
        shard: The units it spans.
        position: Where reading resumes.
        taken: Occurrences taken in it so far, per entry (emptied once the shard is done and
            summed: the pass's ``seen`` then holds its entries).
        stats: The producer's counters for the part read.
        done: Whether the shard is read to its end (or to where the pass stops early).
        leftover: Encoder inputs of the part read that are not summed yet.

    """

    shard: Shard
    position: Position
    taken: EntryCounts = field(default_factory=EntryCounts.none)
    stats: RunStats = field(default_factory=RunStats)
    done: bool = False
    leftover: list[EncoderInput] = field(default_factory=list)

    @classmethod
    def fresh(cls, shard: Shard, skipped: bool = False) -> ShardState:
        """A shard before it is read; a ``skipped`` one lies past where the pass stops."""
        return cls(shard, shard.start, stats=RunStats(stopped_early=skipped), done=skipped)

    def without_leftover(self) -> ShardState:
        """A copy to hand to a producer, which changes its counters as it reads."""
        return replace(self, stats=replace(self.stats), leftover=[])

    def bytes_done(self, corpus: Corpus | TextCorpus) -> int:
        """Bytes of the shard read so far (a shard skipped, or not begun: 0)."""
        start, end = shard_bytes(corpus, self.shard)
        if self.done and not self.stats.stopped_early:
            return end - start
        return min(max(0, offset_of(corpus, self.position) - start), end - start)

    def work(self, corpus: Corpus | TextCorpus) -> Work:
        """The bytes and sentences of the shard done."""
        return Work(self.bytes_done(corpus), self.stats.sentences)

    @property
    def pending(self) -> bool:
        """Whether the pass still has something to do here: read on, or sum its leftover."""
        return not self.done or bool(self.leftover)


@dataclass
class PassState:
    """Sums and counts of the entries seen, counters, each shard's state, the quotas.

    The sums are kept for the entries seen only (``rows``, ascending).

    Attributes:
        rows: The entries with a count, ascending.
        sums: Float64 sums of their occurrence vectors, ``[len(rows), dim]``.
        counts: Their occurrences summed.
        stats: The encoder side's counters (tokens, padded tokens, float32 re-runs) and the
            seconds of the runs before.
        shards: The shards, in corpus order.
        seen: The entries that occur in the shards done (ascending; whether or not the encoder
            could read them).
        quotas: With ``max_contexts``, which occurrences each shard may take (``None``: all).
        targets: With ``sentence_targets``, the sample of sentences kept so far.

    """

    rows: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    stats: RunStats = field(default_factory=RunStats)
    shards: list[ShardState] = field(default_factory=list)
    seen: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    quotas: QuotaPlan | None = None
    targets: SentenceTargets | None = None

    @classmethod
    def empty(
        cls, dim: int, shards: list[ShardState], quotas: QuotaPlan | None = None
    ) -> PassState:
        """Nothing summed yet."""
        none = np.zeros(0, dtype=np.int64)
        return cls(none, np.zeros((0, dim)), none.copy(), RunStats(), shards, quotas=quotas)

    def dense(self, entries: int) -> tuple[np.ndarray, np.ndarray]:
        """``[entries, dim]`` sums and ``[entries]`` counts."""
        sums = np.zeros((entries, self.sums.shape[1]))
        counts = np.zeros(entries, dtype=np.int64)
        sums[self.rows] = self.sums
        counts[self.rows] = self.counts
        return sums, counts

    def means(self, entries: int) -> tuple[np.ndarray, np.ndarray]:
        """Float32 mean vector (zeros where unseen) and count per entry.

        Divided in float64 and rounded once to float32, with no dense float64 copy of the sums.
        """
        scaled = np.empty(self.sums.shape, dtype=np.float32)
        np.divide(self.sums, np.maximum(self.counts, 1)[:, None], out=scaled, casting="same_kind")
        means = np.zeros((entries, self.sums.shape[1]), dtype=np.float32)
        means[self.rows] = scaled
        counts = np.zeros(entries, dtype=np.int64)
        counts[self.rows] = self.counts
        return means, counts

    def run_stats(self) -> RunStats:
        """Every counter of the pass: the shards' in corpus order, then the encoder side's."""
        return RunStats.merged([*(shard.stats for shard in self.shards), self.stats])

    def occurring(self, entries: int) -> np.ndarray:
        """Which entries occur in the part read (whether or not the encoder could read them)."""
        found = np.zeros(entries, dtype=bool)
        found[self.seen] = True
        for shard in self.shards:
            found[shard.taken.entries] = True
        return found

    def work(self, corpus: Corpus | TextCorpus) -> Work:
        """Bytes and sentences done over all shards."""
        return sum((shard.work(corpus) for shard in self.shards), Work())

    def read_up_to(self, files: int) -> Position:
        """The part of a corpus of ``files`` files that a resume needs unchanged.

        All of it once it is cut into shards (the cuts are byte offsets); in one shard, the part
        read.
        """
        if len(self.shards) != 1:
            return Position(files, 0, 1, 0)
        return self.shards[0].position


def offset_of(corpus: Corpus | TextCorpus, position: Position) -> int:
    """Corpus bytes before ``position`` (texts in memory: none are known before they are read)."""
    return corpus.offset_of(position) if isinstance(corpus, Corpus) else 0


def shard_bytes(corpus: Corpus | TextCorpus, shard: Shard) -> tuple[int, int]:
    """Where ``shard`` starts and ends, counted in bytes over the corpus's files in order."""
    return offset_of(corpus, shard.start), offset_of(corpus, shard.stop)
