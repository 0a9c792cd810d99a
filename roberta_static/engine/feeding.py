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
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from ..errors import Interrupted
from ..model.batches import Batch, EncoderInput, batch_groups, padded
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

# Inputs that do not fill a batch wait at most this long for more once the encoders are idle:
# long enough for several chunks to arrive, short beside a run.
_MAX_WAIT_SECONDS = 0.25
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

    ``pooled``: batches are formed from the inputs of chunks of any shard (see :class:`Batcher`).
    """

    def __init__(
        self,
        job: Job,
        encoders: list[Encoder],
        feeder: Feeder,
        report: ProgressCallback,
        saver: Saver,
        pooled: bool = False,
    ) -> None:
        self.job, self.encoders, self.feeder = job, encoders, feeder
        self.report, self.saver, self.pooled = report, saver, pooled
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
        pool = self.job.config.chunk_sentences if self.pooled else 0
        batcher = Batcher(encoder.batch_tokens, encoder.subwords.pad_id, pool)
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
        """What every wait does a few times a second: save, batch, report.

        Saves when due, hands the encoders the inputs waiting once they idle long, and reports
        the batches summed since the last report (a chunk can take many seconds on a CPU).
        """
        if ledger.summed and self.saver.due():
            self.saver.save(self._snapshot(ledger))
        if encoding.idle() and batcher.waited() >= _MAX_WAIT_SECONDS:
            encoding.put(batcher.flush(), stop)
        if ledger.summed != self.reported:
            self.reported = ledger.summed
            self.report(start.progress(ledger.total(), self._tokens()))

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
            # The last batch not full waits for more inputs, until the encoders are idle at a
            # poll (a few times a second) or no shard is left to read.
            if not run.encoding.put(run.batcher.add(sent, flush=not open_shards), run.watch):
                return False
            self.report(run.start.progress(run.ledger.total(), self._tokens()))
        done = run.encoding.wait(run.watch)
        self.report(run.start.progress(run.ledger.total(), self._tokens()))
        return done

    def _start(self, state: PassState, run: _Run) -> set[int] | None:
        """Hand the resumed leftovers to the encoders and the shards to read to the feeder.

        Returns the shards being read, or None when a stop comes first.
        """
        reading = set()
        for index, shard in enumerate(state.shards):
            if shard.leftover:
                batches = run.batcher.add(run.ledger.resumed(index, shard), flush=True)
                if not run.encoding.put(batches, run.watch):
                    return None
            if not shard.done:
                self.feeder.submit(("encode", index, shard.snapshot()))
                reading.add(index)
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
    ``is_set`` a few times a second, so checkpoints come every ``every_seconds`` and idle
    encoders get the inputs waiting, whatever the pass waits for.
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

    One chunk at a time (``pool_inputs`` 0, one process): each chunk's inputs make their own
    batches, so a run's batches, and its sums, are the same every time. Pooled (worker
    processes, a Ray encoder actor): inputs of chunks from any shard wait together until
    ``pool_inputs`` of them (a chunk's worth) are in, then make batches as one chunk's would, so
    more workers, and so smaller pieces of the corpus per chunk, never mean smaller batches.
    """

    def __init__(self, batch_tokens: int, pad_id: int, pool_inputs: int = 0) -> None:
        self.batch_tokens, self.pad_id, self.pool_inputs = batch_tokens, pad_id, pool_inputs
        self.pool: list[tuple[C, int]] = []  # (chunk, input number) waiting
        self.since = 0.0  # when the inputs waiting began to wait

    def waited(self) -> float:
        """Seconds the inputs waiting have waited (0 when none wait)."""
        return time.monotonic() - self.since if self.pool else 0.0

    def add(self, chunk: C, flush: bool = False) -> list[tuple[Batch, list[tuple[C, int]]]]:
        """The batches ready once ``chunk`` is in (with ``flush``, of every input waiting)."""
        if not self.pool:
            self.since = time.monotonic()
        self.pool += [(chunk, number) for number in range(len(chunk.inputs))]
        if flush or len(self.pool) >= self.pool_inputs:
            return self.flush()
        return []

    def flush(self) -> list[tuple[Batch, list[tuple[C, int]]]]:
        """Batches of every input waiting."""
        inputs = [chunk.inputs[number] for chunk, number in self.pool]
        batches = [
            (padded([inputs[i] for i in group], self.pad_id), [self.pool[i] for i in group])
            for group in batch_groups(inputs, self.batch_tokens)
        ]
        self.pool = []
        return batches
