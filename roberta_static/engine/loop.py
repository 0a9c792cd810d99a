"""The pass loop: one loop, in the driver's main thread, whatever runs the two sides.

It hands shard tasks to a :class:`~.base.Feeder` in the order the :class:`~.schedule.Schedule`
gives, forms batches from the inputs of any shard's chunks (:class:`~.batcher.Batcher`), hands
them to an :class:`~.base.EncoderPool`, and keeps the :class:`~.ledger.Ledger` of what is summed.
It alone saves, stops and reports: every wait in it is a short poll, so a checkpoint comes when
due and a stop takes effect whatever the pass is waiting for.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from ..model.batches import Batch
from ..progress import PassStart, ProgressCallback
from ..stopping import Checkpointing
from .base import EncoderPool, Feeder, Job
from .batcher import Batcher
from .checkpoint import Saver
from .heap import trim_heap
from .ledger import Ledger, SentChunk
from .messages import Chunk, Counted
from .schedule import Schedule, fresh_state
from .state import PassState

POLL_SECONDS = 0.1


def run_pass(
    job: Job,
    feeder: Feeder,
    pool: Callable[[Callable[[], bool]], EncoderPool],
    resume: PassState | None,
    stopping: Checkpointing | None,
    progress: ProgressCallback,
    sharded: bool,
) -> PassState:
    """A pass from ``resume`` (or the start) fed by ``feeder``; the state at its end.

    Args:
        job: The model, inputs and options.
        feeder: Runs the shard tasks.
        pool: Makes the encoder pool, given whether the run is asked to stop; closed at the end.
        resume: A saved state to go on from.
        stopping: Where and when to save, and the stop.
        progress: Called with the pass's progress.
        sharded: A pass from the start cuts the corpus into shards (else it reads it as one).

    """
    saver = job.saver(stopping, resume)
    state = resume or fresh_state(job.corpus, len(job.vocab), job.dim, job.config, sharded)
    encoders = pool(lambda: saver.stopping)
    try:
        return PassLoop(job, feeder, encoders, saver, progress).run(state)
    finally:
        encoders.close()


class PassLoop:
    """One pass over a state's shards, fed by ``feeder``, summed by ``pool``.

    Args:
        job: The model, inputs and options.
        feeder: Runs the shard tasks.
        pool: Encodes and sums the batches.
        saver: The pass's checkpoints, and whether it was asked to stop.
        report: Called with the pass's progress.

    """

    def __init__(
        self, job: Job, feeder: Feeder, pool: EncoderPool, saver: Saver, report: ProgressCallback
    ) -> None:
        self.job, self.feeder, self.pool = job, feeder, pool
        self.saver, self.report = saver, report
        encoder = job.encoder
        self.batcher: Batcher[SentChunk] = Batcher.for_budget(
            encoder.batch_tokens, encoder.subwords.pad_id
        )
        self.waiting: deque[tuple[int, Batch]] = deque()  # batches made, not yet in the pool
        self.reported = -1  # batches summed at the last progress report

    def run(self, state: PassState) -> PassState:
        """Run every shard of ``state`` to its end; the state then.

        Saves now and then without pausing anything, and when asked to stop: the batches
        queued or in flight are then dropped (they wait in the checkpoint) and
        :class:`Interrupted` is raised once saved. A stop asked before the first batch is summed
        waits for one (a signal, which can stop at once, raises there instead: see
        :class:`~roberta_static.stopping.Checkpointing`).
        """
        self.schedule = Schedule(state)
        self.ledger = Ledger(state.shards, state.seen, len(self.job.vocab), self.job.corpus)
        self.pool.restore(state)
        self.start = PassStart(self.job.corpus.total_bytes, self.ledger.total(), self.pool.tokens())
        self._report()
        for index, shard in enumerate(state.shards):
            if shard.leftover:  # they wait again with the inputs to come, as when saved
                self._batch(self.ledger.resumed(index, shard))
        while self.schedule.reading or self.waiting or not self.ledger.idle:
            self._tick()
            self._hand_out()
            self._turn()
        return self._snapshot()

    def _turn(self) -> None:
        """One step of work, waiting at most a poll: batches to the pool first, then chunks."""
        if self.waiting:
            ticket, batch = self.waiting[0]
            if self.pool.offer(ticket, batch, POLL_SECONDS):
                self.waiting.popleft()
        elif self.schedule.reading:
            message = self.feeder.receive(POLL_SECONDS)
            if message is not None:
                self._take(message)
        elif self.batcher.pool:
            self._flush()
        else:  # the pool is summing the last batches
            time.sleep(POLL_SECONDS / 10)

    def _hand_out(self) -> None:
        """Keep the feeder busy: as many tasks running as it runs at once, and as many queued."""
        while self.schedule.running < 2 * self.feeder.capacity:
            task = self.schedule.next_task()
            if task is None:
                return
            self.feeder.submit(task)

    def _take(self, message: Chunk | Counted) -> None:
        if isinstance(message, Counted):
            for index in self.schedule.counted(message):
                self.ledger.skip(index)
            return
        if message.done:
            self.schedule.finished()
        self._batch(self.ledger.send(message))
        self._report()

    def _batch(self, chunk: SentChunk) -> None:
        # Inputs whose batch is not full wait for more, until no shard is left to read.
        flush = not self.schedule.reading or self._stop_waits_for_a_sum()
        for batch, members in self.batcher.add(chunk, flush=flush):
            self.waiting.append((self.ledger.ticket(members), batch))

    def _flush(self) -> None:
        for batch, members in self.batcher.flush():
            self.waiting.append((self.ledger.ticket(members), batch))

    def _tick(self) -> None:
        """What every turn of the loop does: take the sums, save when due, report, stop."""
        trim_heap()
        self._summed(self.pool.summed())
        if self.saver.stopping:
            if self.ledger.summed:  # what is queued or in flight waits in the checkpoint
                self.saver.stopped(self._snapshot(), summed_any=True)
            if self.batcher.pool:
                self._flush()  # the inputs waiting go at once: the stop waits for a sum
        if self.ledger.summed and self.saver.due():
            self.saver.save(self._snapshot())
            trim_heap(now=True)  # the snapshot's copies are freed: their pages go back at once
        if self.ledger.summed != self.reported:
            self._report()

    def _summed(self, tickets: list[int]) -> None:
        first = not self.ledger.summed and tickets
        self.ledger.add(tickets)
        if first and self.saver.checkpointing is not None:
            # From the first batch summed, a stop saves the work done (before, it loses none).
            self.saver.checkpointing.nothing_to_lose = False

    def _stop_waits_for_a_sum(self) -> bool:
        return self.saver.stopping and not self.ledger.summed

    def _report(self) -> None:
        self.reported = self.ledger.summed
        self.report(self.start.progress(self.ledger.total(), self.pool.tokens()))

    def _snapshot(self) -> PassState:
        """The state of this instant: the pool's sums, and the shards as the ledger has them."""
        sums = self.pool.snapshot()
        self._summed(sums.tickets)
        return PassState(
            sums.rows,
            sums.sums,
            sums.counts,
            sums.stats,
            shards=self.ledger.states(),
            seen=self.ledger.seen,
            quotas=self.schedule.plan(),
            targets=sums.targets,
        )
