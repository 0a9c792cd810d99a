"""Which shard task comes next: shards read in corpus order, counted first where quotas need it.

With ``max_contexts`` over several shards, a shard is read once every shard before it is
counted (see :mod:`.quotas`); counting runs a shard or two ahead of reading, so the first batch
comes as soon as in a pass without quotas. A shard's counting keeps what it read
(:class:`~.reading.ShardReading`), and the shard's reading replays it: the corpus is read once
(where the feeder hands readings back: Ray's tasks do not, and their shards are read again).
Where reading catches up, the shard after those counted is read while it is counted (its own
counts bound only the shards after it); that counting keeps no reading, which nothing would
replay.
Once the counts show where every entry has had its N, the shards after that one are skipped:
never counted, never read.
"""

from __future__ import annotations

from dataclasses import replace

from ..config import DistillConfig
from ..text.corpus import START, Corpus, Position, TextCorpus
from ..text.shards import Shard, plan_shards
from .messages import Counted, CountShard, EncodeShard, Task
from .quotas import EntryCounts, QuotaPlan
from .reading import ShardReading
from .state import PassState, ShardState


def fresh_state(
    corpus: Corpus | TextCorpus, entries: int, dim: int, config: DistillConfig, sharded: bool
) -> PassState:
    """A pass from the start: the whole corpus as one shard, or cut into shards."""
    if sharded and isinstance(corpus, Corpus):
        shards = plan_shards(corpus.files, sizes=corpus.sizes)
    else:
        shards = [whole_corpus(corpus)]
    limit = config.max_contexts
    quotas = QuotaPlan.fresh(entries, limit) if limit else None
    return PassState.empty(dim, [ShardState.fresh(shard) for shard in shards], quotas)


def whole_corpus(corpus: Corpus | TextCorpus) -> Shard:
    """The corpus as one shard."""
    return Shard(START, Position(len(corpus.files), 0, 1, 0))


class Schedule:
    """The tasks of a pass, handed out in order, and what the counts that come back say.

    Args:
        state: The pass as it starts (fresh, or resumed: its quota plan says what is counted).

    """

    def __init__(self, state: PassState) -> None:
        self.shards = state.shards
        self.quotas = state.quotas
        self.to_read = [index for index, shard in enumerate(self.shards) if not shard.done]
        # The last shard bounds no later one: it is never counted, it takes what is left.
        counting = self.quotas is not None and len(self.shards) > 1
        first = self.quotas.counted if self.quotas is not None else 0
        self.to_count = list(range(first, len(self.shards) - 1)) if counting else []
        self.arrived: dict[int, EntryCounts] = {}  # counts that came before an earlier shard's
        self.readings: dict[int, ShardReading] = {}  # of shards counted and not yet handed out
        self.counting: set[int] = set()  # shards whose counts are handed out and not yet in
        self.running = 0  # tasks handed out and not finished

    @property
    def reading(self) -> bool:
        """Whether a shard is left to read (or being read)."""
        return bool(self.to_read) or self.running > 0

    def next_task(self) -> Task | None:
        """The next task to hand out, if one can start now.

        The first shard left to read, once the shards before it are counted (and its own
        counting, if handed out, has come with the reading to replay); else the next shard to
        count.
        """
        if self.to_read and self._ready(self.to_read[0]):
            index = self.to_read.pop(0)
            allowance = self.quotas.allowance(index) if self.quotas is not None else None
            state = self.shards[index].without_leftover()
            task: Task = EncodeShard(index, state, allowance, self.readings.pop(index, None))
        elif self.to_count:
            index = self.to_count.pop(0)
            exhausted = self.quotas.exhausted() if self.quotas is not None else None
            task = CountShard(index, self.shards[index].shard, exhausted, self._replays(index))
            self.counting.add(index)
        else:
            return None
        self.running += 1
        return task

    def _ready(self, index: int) -> bool:
        planned = self.quotas is None or index <= self.quotas.counted
        return planned and index not in self.counting

    def _replays(self, index: int) -> bool:
        """Whether the shard's reading will replay its counting's.

        Not if it is handed out already (the shard after those counted is read while it is
        counted), or resumed from a position inside it.
        """
        state = self.shards[index]
        return index in self.to_read and state.position == state.shard.start

    def finished(self) -> None:
        """A task handed out has ended (a shard's last chunk, or its counts, came)."""
        self.running -= 1

    def counted(self, message: Counted) -> list[int]:
        """Take a shard's counts into the plan; returns the shards this shows are past the end.

        A shard past the end lies after the one where every entry has had its N: it is never
        read (its state says it was skipped).
        """
        self.finished()
        quotas = self.quotas
        if quotas is None:
            raise ValueError("counts came for a pass without quotas")
        self.arrived[message.shard] = message.counts
        self.counting.discard(message.shard)
        if message.reading is not None:
            self.readings[message.shard] = message.reading
        while quotas.counted in self.arrived:
            quotas.add(self.arrived.pop(quotas.counted))
        last = quotas.last_shard_read()
        if last is None:
            return []
        skipped = [index for index in self.to_read if index > last]
        self.to_read = [index for index in self.to_read if index <= last]
        self.to_count = [index for index in self.to_count if index <= last]
        for index in skipped:
            self.readings.pop(index, None)
            self.shards[index] = ShardState.fresh(self.shards[index].shard, skipped=True)
        return skipped

    def plan(self) -> QuotaPlan | None:
        """A copy of the quota plan as it stands, for a checkpoint."""
        if self.quotas is None:
            return None
        quotas = self.quotas
        return replace(
            quotas,
            reached_in=quotas.reached_in.copy(),
            last_quota=quotas.last_quota.copy(),
            before=quotas.before.copy(),
        )
