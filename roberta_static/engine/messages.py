"""What the pass loop and the CPU side say to each other, whichever engine carries it.

The loop sends shard tasks (:data:`Task`); whatever runs them (a thread, worker processes, Ray
tasks) answers each with :data:`Message` values: the chunks of a shard in order, the last one
``done``; a shard's counts; or the failure that ended a task. Plain data, numpy and picklable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import RobertaStaticError
from ..model.batches import EncoderInput, pack_inputs, unpack_inputs
from ..progress import Work
from ..text.corpus import Position
from ..text.shards import Shard
from .quotas import EntryCounts
from .reading import ShardReading
from .state import ShardState
from .stats import RunStats


@dataclass(frozen=True)
class EncodeShard:
    """Read a shard from where its state says, taking at most ``allowance`` of each entry.

    ``allowance``: per entry (see :meth:`~.quotas.QuotaPlan.allowance`); ``None``: all.
    ``reading``: the shard as its counting read it, replayed instead of reading it again (a
    shard not begun).
    """

    shard: int
    state: ShardState
    allowance: np.ndarray | None = None
    reading: ShardReading | None = None


@dataclass(frozen=True)
class CountShard:
    """Count each entry's occurrences in a shard, keeping what reading it found.

    ``exhausted``: per entry, whether it has its N before this shard; its occurrences here are
    neither counted nor kept (``None``: every entry's are). ``keep_reading``: send the reading
    back with the counts, for the shard's reading to replay (not for a shard already being read,
    or resumed from a position inside it).
    """

    shard: int
    span: Shard
    exhausted: np.ndarray | None = None
    keep_reading: bool = True


Task = EncodeShard | CountShard


@dataclass
class Chunk:
    """The encoder inputs of a chunk of a shard's sentences, and the shard's state after them.

    Attributes:
        shard: The shard's number.
        inputs: The sentences to encode, with their occurrences.
        position: Where reading resumes after the chunk.
        stats: The producer's counters for the shard up to the chunk's end.
        taken: The occurrences the chunk took.
        done: Whether the shard ends with this chunk.
        end_bytes: The shard's bytes up to the chunk's last unit (to the end of what was read,
            for the last chunk).

    """

    shard: int
    inputs: list[EncoderInput]
    position: Position
    stats: RunStats
    taken: EntryCounts
    done: bool
    end_bytes: int

    @property
    def end(self) -> Work:
        """The bytes and sentences of the shard once this chunk is summed."""
        return Work(self.end_bytes, self.stats.sentences)

    # Worker processes hand chunks over pickled: its inputs as a few flat arrays, not two arrays
    # per sentence, whose unpickling held up the encoder's process (see feed.py's hand-over).
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "inputs": pack_inputs(self.inputs)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, inputs=unpack_inputs(state["inputs"]))


@dataclass(frozen=True)
class Counted:
    """The occurrences of each entry in a shard, and the reading that found them (if kept)."""

    shard: int
    counts: EntryCounts
    reading: ShardReading | None


@dataclass(frozen=True)
class Failure:
    """The error that ended a shard's task, to be raised where the loop receives it."""

    shard: int
    error: RobertaStaticError


Message = Chunk | Counted | Failure


def raise_failure(message: Message) -> Chunk | Counted:
    """The message, unless it is a task's failure, whose error is raised."""
    if isinstance(message, Failure):
        raise message.error
    return message
