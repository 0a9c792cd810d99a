"""A pass on this machine: a feeder reads the shards, encoder threads sum their batches.

The feeder runs the CPU side (:class:`~.producer.Producer`) over shard tasks: in a thread of this
process (the serial engine) or in worker processes (the local engine). Either way it answers
each task with messages, and the pass hands each shard's chunks to the encoder threads and the
ledger (:mod:`.encoders`), which knows at every instant a state to save. Sums live on the
encoders' devices, in float64, one accumulator per encoder, merged in a fixed order.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from ..errors import Interrupted
from ..model.batches import Batch, EncoderInput, Run, length_runs, padded
from ..model.encoder import Encoder
from ..model.pooling import Accumulator
from ..progress import PassStart, ProgressCallback
from ..text.shards import Shard
from .base import Job
from .checkpoint import Saver
from .encoders import EncoderThreads, Ledger, SentChunk
from .state import PassState
from .stats import RunStats
from .worker import Message

# Inputs whose batch is not full wait for more while they hold at most this many batches' worth
# of tokens (see Batcher): enough for a length's batch to fill, little left for the end ...
HOLD_BATCHES = 4
# ... and at least this many tokens. A batch fills from inputs of its lengths only (some 40
# groups span sentence lengths at 10% padding), so a small budget's 4 batches filled few: with
# the CPU's 8,192, worker processes' smaller chunks made batches 0.81x as full as one process's
# (0.95x with this floor; benchmarks/batcher.py). A GPU's budget is past it.
HOLD_MIN_TOKENS = 131_072
# ... and until this many times as many tokens have come after them: the ledger keeps every
# chunk from the oldest one not summed on, so a wait without this bound kept the whole corpus.
HOLD_AGE = 2
_POLL_SECONDS = 0.1


class Feeder(Protocol):
    """Runs shard tasks: ``("count", index, Shard)`` or ``("encode", index, ShardState)``."""

    def submit(self, task: Message) -> None:
        """Queue a task."""

    def receive(self, stop: Any) -> Message | None:
        """The next message; None when ``stop`` is set first. A task's error is raised here."""


def put_unless_closed(target: queue.Queue, message: Message, closed: threading.Event) -> None:
    """Put ``message`` into ``target``, waiting for room; :class:`FeederClosed` once closed."""
    while not closed.is_set():
        try:
            target.put(message, timeout=_POLL_SECONDS)
            return
        except queue.Full:
            continue
    raise FeederClosed


class FeederClosed(BaseException):  # noqa: N818 (a signal through serve, which catches Exception)
    """The feeder was closed while a thread of it waited to hand over a message."""


def raise_failure(message: Message) -> Message:
    """The message, unless it carries a task's error, which is raised."""
    if message[0] == "error":
        raise message[2]
    return message


class FedPass:
    """The pass over a state's shards, fed by ``feeder``, summed by ``encoders``.

    Batches are formed from the inputs of any chunks, of any shard (see :class:`Batcher`).
    """

    def __init__(
        self,
        job: Job,
        encoders: list[Encoder],
        feeder: Feeder,
        report: ProgressCallback,
        saver: Saver,
    ) -> None:
        self.job, self.encoders, self.feeder = job, encoders, feeder
        self.report, self.saver = report, saver
        self.accumulators = [Accumulator(len(job.vocab), job.dim, e.device) for e in encoders]
        self.encoder_stats = [RunStats() for _ in encoders]
        self.reported = 0  # batches summed at the last progress report from a poll

    def count(self, shards: list[Shard]) -> np.ndarray:
        """``[shards, entries]`` occurrences of each entry in each shard (for the quotas)."""
        counts = np.zeros((len(shards), len(self.job.vocab)), dtype=np.int64)
        for index, shard in enumerate(shards):
            self.feeder.submit(("count", index, shard))
        for _ in shards:
            message = self.feeder.receive(self.saver.stop)
            if message is None:
                raise Interrupted(
                    "stopped while counting occurrences per shard, before any vector was "
                    "computed; nothing was saved"
                )
            _, index, found = message
            counts[index] = found
        return counts

    def run(self, state: PassState) -> PassState:
        """Run every shard of ``state`` to its end; the state then.

        Saves now and then without pausing anything, and when asked to stop: the batches
        queued or in flight are then dropped (they wait in the checkpoint) and
        :class:`Interrupted` is raised once saved.
        """
        self._restore(state)
        files = getattr(self.job.corpus, "files", [])
        done = [shard.work(files) for shard in state.shards]
        ledger = Ledger(state.shards, done, self._something_to_lose)
        start = PassStart(self.job.corpus.total_bytes, ledger.total(), self._tokens())
        stop = _StopOnceSummed(self.saver, ledger)
        encoding = EncoderThreads(
            self.encoders, self.accumulators, self.encoder_stats, self.job.config, ledger, stop
        )
        encoder = self.encoders[0]
        batcher = Batcher.for_budget(encoder.batch_tokens, encoder.subwords.pad_id)
        watch = _Watch(stop, lambda: self._poll(ledger, encoding, batcher, start, stop))
        try:
            self.report(start.progress(ledger.total(), self._tokens()))
            if not self._feed(state, _Run(ledger, encoding, batcher, start, watch)):
                self.saver.stopped(self._snapshot(ledger), ledger.summed > 0)
            return self._snapshot(ledger)
        finally:
            encoding.close()

    def _restore(self, state: PassState) -> None:
        """The resumed sums and encoder counters go to the first encoder."""
        self.accumulators[0].restore(*state.dense(len(self.job.vocab)))
        self.encoder_stats[0] = RunStats.merged([state.stats])

    def _something_to_lose(self) -> None:
        """From the first batch summed, a stop saves the work done (before, it loses nothing)."""
        if self.saver.checkpointing is not None:
            self.saver.checkpointing.nothing_to_lose = False

    def _poll(
        self,
        ledger: Ledger,
        encoding: EncoderThreads,
        batcher: Batcher[SentChunk],
        start: PassStart,
        stop: Any,
    ) -> None:
        """What every wait does a few times a second: save when due, report new sums.

        A chunk can take many seconds on a CPU: the batches summed since the last report count.
        A stop asked before any batch is summed takes effect once one is: the inputs waiting for
        their batches to fill go at once, or the stop could wait for the corpus's end.
        """
        if self._stop_waits_for_a_sum(ledger) and batcher.pool:
            encoding.put(batcher.flush(), stop)
        if ledger.summed and self.saver.due():
            self.saver.save(self._snapshot(ledger))
        if ledger.summed != self.reported:
            self.reported = ledger.summed
            self.report(start.progress(ledger.total(), self._tokens()))

    def _stop_waits_for_a_sum(self, ledger: Ledger) -> bool:
        """Whether a stop is asked that waits for a first batch summed (see _StopOnceSummed)."""
        return self.saver.stopping and not ledger.summed

    def _feed(self, state: PassState, run: _Run) -> bool:
        """Send the shards to the feeder and their batches to the encoders until all are summed.

        Returns False when a stop comes first.
        """
        open_shards = self._start(state, run)
        if open_shards is None:
            return False
        while open_shards:
            message = self.feeder.receive(run.watch)
            if message is None:
                return False
            _, index, chunk = message
            if chunk.state.done:
                open_shards.discard(index)
            sent = run.ledger.send(index, chunk)
            # Inputs whose batch is not full wait for more, until no shard is left to read.
            flush = not open_shards or self._stop_waits_for_a_sum(run.ledger)
            if not run.encoding.put(run.batcher.add(sent, flush=flush), run.watch):
                return False
            self.report(run.start.progress(run.ledger.total(), self._tokens()))
        done = run.encoding.wait(run.watch)
        self.report(run.start.progress(run.ledger.total(), self._tokens()))
        return done

    def _start(self, state: PassState, run: _Run) -> set[int] | None:
        """Hand the resumed leftovers to the encoders and the shards to read to the feeder.

        Returns the shards being read, or None when a stop comes first.
        """
        reading = {index for index, shard in enumerate(state.shards) if not shard.done}
        for index, shard in enumerate(state.shards):
            if shard.leftover:
                # They wait again with the inputs to come, as they did when saved.
                batches = run.batcher.add(run.ledger.resumed(index, shard), flush=not reading)
                if not run.encoding.put(batches, run.watch):
                    return None
        for index in sorted(reading):
            self.feeder.submit(("encode", index, state.shards[index].snapshot()))
        return reading

    def _tokens(self) -> int:
        return sum(stats.tokens for stats in self.encoder_stats)

    def _snapshot(self, ledger: Ledger) -> PassState:
        """The state of this instant (see :meth:`Ledger.snapshot`)."""
        shards, (sums, counts, stats) = ledger.snapshot(lambda _: self._sums())
        return PassState.of_sums(sums, counts, stats, shards)

    def _sums(self) -> tuple[np.ndarray, np.ndarray, RunStats]:
        """Sums, counts and encoder counters, merged in a fixed order (encoder by encoder)."""
        states = [accumulator.state() for accumulator in self.accumulators]
        sums = np.sum([sums for sums, _ in states], axis=0)
        counts = np.sum([counts for _, counts in states], axis=0)
        return sums, counts, RunStats.merged(self.encoder_stats)


class _StopOnceSummed:
    """The run's stop, in effect once it has summed a batch: a stop then saves progress.

    A run asked to stop before (``Checkpointing.stop`` set by its caller) sums a batch first; a
    signal stops it at once instead, with nothing saved (``Checkpointing.nothing_to_lose``).
    """

    def __init__(self, saver: Saver, ledger: Ledger) -> None:
        self.saver, self.ledger = saver, ledger

    def is_set(self) -> bool:
        return self.saver.stopping and self.ledger.summed > 0


class _Watch:
    """What the pass's waits poll, in the main thread: ``poll``, then whether to stop.

    Every wait (for the feeder, for room in the encoders' queue, for the last batches) polls
    ``is_set`` a few times a second, so checkpoints come every ``every_seconds`` whatever the
    pass waits for.
    """

    def __init__(self, stop: _StopOnceSummed, poll: Callable[[], None]) -> None:
        self.stop, self.poll = stop, poll

    def is_set(self) -> bool:
        self.poll()
        return self.stop.is_set()


@dataclass
class _Run:
    """The parts of one run of the pass."""

    ledger: Ledger
    encoding: EncoderThreads
    batcher: Batcher[SentChunk]
    start: PassStart
    watch: _Watch


class Pooled(Protocol):
    """What a :class:`Batcher` takes: a chunk of encoder inputs (of any shard)."""

    inputs: list[EncoderInput]


C = TypeVar("C", bound=Pooled)


class Batcher(Generic[C]):
    """Encoder batches from the inputs of the chunks handed over, with the inputs each holds.

    Inputs of any chunk (and, with worker processes or Ray, of any shard) wait together, grouped
    by length as :func:`~..model.batches.length_runs` groups them. A group goes to the encoder
    once full (another input as long as its longest would pass the token budget); the others
    wait for more inputs, the largest going first whenever together they hold more than
    ``hold_tokens`` real tokens (a pass's are :meth:`for_budget`'s). A group also goes once
    ``HOLD_AGE`` times ``hold_tokens`` have come after an input of it: a chunk leaves memory only
    once every input before it is summed. A chunk holds inputs of every length, so its inputs
    alone fill few groups: with a GPU's budget of up to 131,072 tokens, batching chunk by chunk
    made batches of about 4,000. What waits is bounded by ``hold_tokens``, and so is what the
    encoder has left once the corpus is read. Which inputs make a batch depends only on the
    order they arrive in, so a run in one process makes the same batches, and sums, every time.
    """

    def __init__(self, batch_tokens: int, pad_id: int, hold_tokens: int) -> None:
        self.batch_tokens, self.pad_id, self.hold_tokens = batch_tokens, pad_id, hold_tokens
        self.waiting: dict[int, list[tuple[C, int]]] = {}  # input length: (chunk, input number)
        self.arrivals: dict[int, list[int]] = {}  # input length: tokens handed over with each
        self.added = 0  # tokens handed over so far

    @classmethod
    def for_budget(cls, batch_tokens: int, pad_id: int) -> Batcher:
        """The batcher of a pass whose batches hold ``batch_tokens`` (see ``HOLD_BATCHES``)."""
        return cls(batch_tokens, pad_id, max(HOLD_BATCHES * batch_tokens, HOLD_MIN_TOKENS))

    @property
    def pool(self) -> list[tuple[C, int]]:
        """The inputs waiting, as (chunk, input number)."""
        return [member for members in self.waiting.values() for member in members]

    def add(self, chunk: C, flush: bool = False) -> list[tuple[Batch, list[tuple[C, int]]]]:
        """The batches ready once ``chunk`` is in (with ``flush``, of every input waiting)."""
        self.added += sum(len(item.ids) for item in chunk.inputs)
        for number, item in enumerate(chunk.inputs):
            self.waiting.setdefault(len(item.ids), []).append((chunk, number))
            self.arrivals.setdefault(len(item.ids), []).append(self.added)
        return self._batches(hold=not flush)

    def flush(self) -> list[tuple[Batch, list[tuple[C, int]]]]:
        """Batches of every input waiting."""
        return self._batches(hold=False)

    def _batches(self, hold: bool) -> list[tuple[Batch, list[tuple[C, int]]]]:
        counts = {length: len(members) for length, members in self.waiting.items()}
        groups = list(length_runs(counts, self.batch_tokens))
        going = [not hold or self._ready(group) for group in groups]
        ready = [group for group, goes in zip(groups, going, strict=True) if goes]
        left = sorted((g for g, goes in zip(groups, going, strict=True) if not goes), key=_tokens)
        held = sum(_tokens(group) for group in left)
        while left and held > self.hold_tokens:  # the largest go first: fuller batches
            held -= _tokens(left[-1])
            ready.append(left.pop())
        waiting, arrivals = self.waiting, self.arrivals
        self.waiting, self.arrivals = {}, {}
        for length, begin, end in (run for group in left for run in group):
            self.waiting.setdefault(length, []).extend(waiting[length][begin:end])
            self.arrivals.setdefault(length, []).extend(arrivals[length][begin:end])
        batches = []
        for group in ready:
            members = [m for length, begin, end in group for m in waiting[length][begin:end]]
            inputs = [chunk.inputs[number] for chunk, number in members]
            batches.append((padded(inputs, self.pad_id), members))
        return batches

    def _ready(self, group: list[Run]) -> bool:
        """Whether the group is full, or holds an input that has waited long (see the class)."""
        length = group[-1][0]
        if (sum(end - begin for _, begin, end in group) + 1) * length > self.batch_tokens:
            return True
        oldest = min(self.arrivals[length][begin] for length, begin, _ in group)
        return self.added - oldest > HOLD_AGE * self.hold_tokens


def _tokens(group: list[Run]) -> int:
    """Real tokens of a group of runs."""
    return sum(length * (end - begin) for length, begin, end in group)
