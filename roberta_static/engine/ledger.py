"""Which inputs of which shards' chunks are summed: the pass's state at any instant.

Chunks of each shard arrive in order; their inputs go into batches with other chunks' (of any
shard), and batches are summed in any order. The ledger knows at every instant a state the pass
can resume from: each shard's state after the last chunk it has begun to sum, with the inputs of
its chunks not summed yet (its ``leftover``). So a checkpoint needs no pause, and a stop drops the
batches queued or in flight instead of waiting for them. Only the pass loop uses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..model.batches import EncoderInput
from ..progress import Work
from ..text.corpus import Corpus, TextCorpus
from .messages import Chunk
from .quotas import EntryCounts
from .state import ShardState


@dataclass
class SentChunk:
    """A chunk handed to the encoders, and which of its inputs they have summed.

    ``after``: the shard's state once the chunk is summed. ``parts``: each input's share of the
    bytes and sentences the chunk stands for (``work``). ``kept``: the inputs cannot be made
    again (a resumed shard's leftover), so a checkpoint keeps them even before any is summed.
    """

    shard: int
    after: ShardState
    inputs: list[EncoderInput]
    work: Work
    kept: bool = False
    parts: np.ndarray = field(init=False)  # (inputs, 2): bytes, sentences
    added: np.ndarray = field(init=False)  # bool, per input

    def __post_init__(self) -> None:
        tokens = np.fromiter((len(item.ids) for item in self.inputs), np.int64, len(self.inputs))
        self.parts = self.work.split(tokens)
        self.added = np.zeros(len(self.inputs), dtype=bool)

    @property
    def begun(self) -> bool:
        """Whether a checkpoint must hold this chunk (its state, and its inputs not summed)."""
        return self.kept or bool(self.added.any()) or not self.inputs


Members = list[tuple[SentChunk, int]]  # the inputs a batch holds: (chunk, input number)


class Ledger:
    """The chunks sent and the batches summed, shard by shard.

    Args:
        shards: The shards as the pass starts them.
        seen: The entries the shards done before the pass hold.
        entries: The vocabulary's size.
        corpus: The corpus read (for each shard's bytes done before the pass).

    """

    def __init__(
        self,
        shards: list[ShardState],
        seen: np.ndarray,
        entries: int,
        corpus: Corpus | TextCorpus,
    ) -> None:
        # Each shard as of its chunks summed in full; the chunks sent after them.
        self.settled = [replace(entry, leftover=[]) for entry in shards]
        self.sent: list[list[SentChunk]] = [[] for _ in shards]
        self.taken = [entry.taken for entry in shards]  # each shard's, chunks sent included
        self.sent_up_to = [entry.work(corpus) for entry in shards]
        self.done = list(self.sent_up_to)
        # Marked as each shard is done: a union of sorted arrays per shard would cost the
        # vocabulary's size each time.
        self.seen_mask = np.zeros(entries, dtype=bool)
        self.seen_mask[seen] = True
        self.batches: dict[int, Members] = {}  # each batch not summed yet, by its ticket
        self.summed = 0  # batches summed by this run
        self.tickets = 0  # batches made by this run

    def resumed(self, shard: int, entry: ShardState) -> SentChunk:
        """The leftover a resumed shard holds, as the first chunk it sends."""
        chunk = SentChunk(shard, replace(entry, leftover=[]), entry.leftover, Work(), kept=True)
        self._send(chunk)
        return chunk

    def send(self, chunk: Chunk) -> SentChunk:
        """Record the next chunk of its shard."""
        index = chunk.shard
        self.taken[index] = self.taken[index] + chunk.taken
        after = ShardState(
            self.settled[index].shard, chunk.position, self.taken[index], chunk.stats, chunk.done
        )
        sent = SentChunk(index, after, chunk.inputs, chunk.end - self.sent_up_to[index])
        self.sent_up_to[index] = chunk.end
        self._send(sent)
        return sent

    def _send(self, chunk: SentChunk) -> None:
        self.sent[chunk.shard].append(chunk)
        if not chunk.inputs:  # nothing to sum: done as it comes
            self.done[chunk.shard] += chunk.work
            self._settle(chunk.shard)

    def skip(self, shard: int) -> None:
        """Record a shard as past where the pass stops: it is never read."""
        self.settled[shard] = ShardState.fresh(self.settled[shard].shard, skipped=True)

    def ticket(self, members: Members) -> int:
        """A number for the batch of ``members``, to say later that it is summed."""
        ticket = self.tickets
        self.tickets += 1
        self.batches[ticket] = members
        return ticket

    def add(self, tickets: list[int]) -> None:
        """Record the batches of ``tickets`` as summed."""
        for ticket in tickets:
            members = self.batches.pop(ticket)
            self.summed += 1
            for chunk, numbers in _by_chunk(members):
                chunk.added[numbers] = True
                bytes_done, sentences_done = chunk.parts[numbers].sum(axis=0).tolist()
                self.done[chunk.shard] += Work(bytes_done, sentences_done)
            for shard in {chunk.shard for chunk, _ in members}:
                self._settle(shard)

    def _settle(self, shard: int) -> None:
        chunks = self.sent[shard]
        while chunks and chunks[0].added.all():
            settled = chunks.pop(0).after
            if settled.done:  # its entries join the pass's; the shard needs them no more
                self.seen_mask[settled.taken.entries] = True
                settled = replace(settled, taken=EntryCounts.none())
                self.taken[shard] = settled.taken
            self.settled[shard] = settled

    @property
    def seen(self) -> np.ndarray:
        """The entries that occur in the shards done, ascending."""
        return np.flatnonzero(self.seen_mask)

    @property
    def idle(self) -> bool:
        """Whether every chunk sent is summed."""
        return not any(self.sent)

    def states(self) -> list[ShardState]:
        """The shards' states at this instant.

        A shard's state is the one after its last chunk begun, with the inputs not yet summed
        of the chunks up to it; chunks not begun are dropped (the shard reads them again).
        """
        return [self._now(shard) for shard in range(len(self.settled))]

    def _now(self, shard: int) -> ShardState:
        chunks = self.sent[shard]
        begun = [number for number, chunk in enumerate(chunks) if chunk.begun]
        if not begun:
            return self.settled[shard]
        last = chunks[begun[-1]]
        leftover = [
            item
            for chunk in chunks[: begun[-1] + 1]
            for item, added in zip(chunk.inputs, chunk.added, strict=True)
            if not added
        ]
        return replace(last.after, leftover=leftover)

    def total(self) -> Work:
        """Bytes and sentences done over all shards."""
        return sum(self.done, Work())


def _by_chunk(members: Members) -> list[tuple[SentChunk, list[int]]]:
    """A batch's members grouped by chunk, in the order the chunks first appear."""
    groups: dict[int, tuple[SentChunk, list[int]]] = {}
    for chunk, number in members:
        groups.setdefault(id(chunk), (chunk, []))[1].append(number)
    return list(groups.values())
