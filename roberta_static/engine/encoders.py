"""The encoder pool of this machine: one thread per device, each summing into its own sums.

The model computes outside the GIL, so a thread per encoder keeps each device busy while the
pass loop batches the next inputs. Sums live on the encoders' devices, in float64, one
accumulator per encoder, merged in a fixed order. A batch is summed under one lock with the
record of its ticket, so a snapshot sees a batch whole or not at all.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import DistillConfig
from ..model.batches import Batch
from ..model.encoder import Encoder
from ..model.pooling import Accumulator
from ..vectors.targets import SentenceTargets, empty_like
from .base import Sums
from .state import PassState
from .stats import RunStats
from .step import accumulate

if TYPE_CHECKING:
    from .base import Job


class _Dropped(Exception):
    """Raised inside a forward pass whose batch is dropped (the pool closed meanwhile)."""


class EncoderThreads:
    """Encoders on this machine's devices, a thread each, taking batches from one queue.

    Once closed, or once asked to stop with a batch summed, a batch in flight is cut short at its
    model's next block: a hook on each block checks, so a stop does not wait for the batch
    (seconds on a CPU). A stop closes the pool once the batch in hand is summed.

    Args:
        encoders: One per device.
        entries: Vocabulary size.
        dim: Width of a summed vector.
        config: The run's options (pooling, layers).
        targets: With sentence targets, the empty sample (each encoder fills a copy of it).
        stopping: Whether the run is asked to stop.

    """

    def __init__(
        self,
        encoders: list[Encoder],
        entries: int,
        dim: int,
        config: DistillConfig,
        targets: SentenceTargets | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.entries, self.stopping = entries, stopping
        self.accumulators = [Accumulator(entries, dim, e.device) for e in encoders]
        self.stats = [RunStats() for _ in encoders]
        self.targets = [empty_like(targets) for _ in encoders]
        self.resumed_targets = empty_like(targets)
        self.batches: queue.Queue[tuple[int, Batch] | None] = queue.Queue(maxsize=4 * len(encoders))
        self.lock = threading.Lock()
        self.done: list[int] = []  # tickets summed since the loop last asked
        self.any_summed = False
        self.closed = False
        self.failure: BaseException | None = None
        self.hooks = [
            handle for encoder in encoders for handle in encoder.before_each_block(self._cut_short)
        ]
        self.threads = [
            threading.Thread(target=self._work, args=(number, encoder, config), daemon=True)
            for number, encoder in enumerate(encoders)
        ]
        for thread in self.threads:
            thread.start()

    def restore(self, state: PassState) -> None:
        """The resumed sums and encoder counters go to the first encoder."""
        self.accumulators[0].restore(state.rows, state.sums, state.counts)
        self.stats[0] = RunStats.merged([state.stats])
        if state.targets is not None:
            self.resumed_targets = state.targets

    def offer(self, ticket: int, batch: Batch, timeout: float) -> bool:
        """Queue a batch, waiting up to ``timeout`` for room."""
        self._raise_failure()
        try:
            self.batches.put((ticket, batch), timeout=timeout)
        except queue.Full:
            return False
        return True

    def summed(self) -> list[int]:
        """The tickets summed since the last call."""
        self._raise_failure()
        with self.lock:
            done, self.done = self.done, []
        return done

    def snapshot(self) -> Sums:
        """Sums, counts and counters of the entries summed, merged encoder by encoder.

        Only the entries summed are copied: a dense copy of every encoder's sums would take as
        much memory again as they do.
        """
        self._raise_failure()
        with self.lock:  # the threads add under it: sums and tickets are of the same batches
            first, *others = self.accumulators
            counts = first.counted()
            for accumulator in others:
                counts += accumulator.counted()
            rows = np.flatnonzero(counts)
            sums = first.sums_of(rows)
            for accumulator in others:  # in a fixed order: the same float64 sums every time
                sums += accumulator.sums_of(rows)
            done, self.done = self.done, []
            stats = RunStats.merged(self.stats)
            targets = _merged([self.resumed_targets, *self.targets])
        return Sums(rows, sums, counts[rows], stats, done, targets)

    def tokens(self) -> int:
        """Tokens encoded so far."""
        return sum(stats.tokens for stats in self.stats)

    def close(self) -> None:
        """End the threads: what is queued or in flight is dropped."""
        with self.lock:
            self.closed = True
        for _ in self.threads:
            self.batches.put(None)  # the threads drop what is before it at once
        for thread in self.threads:
            thread.join()
        for hook in self.hooks:
            hook.remove()
        self.hooks = []

    def _work(self, number: int, encoder: Encoder, config: DistillConfig) -> None:
        while (item := self._next()) is not None:
            (ticket, batch), waited = item
            try:
                if self.failure is None and not self.closed:
                    encoded = encoder.encode(batch)
                    with self.lock:
                        if self.closed:
                            continue
                        counted = RunStats(encoder_wait_seconds=waited)
                        accumulator, targets = self.accumulators[number], self.targets[number]
                        accumulate(encoded, batch, accumulator, config, counted, targets)
                        self.stats[number].add(counted)
                        self.done.append(ticket)
                        self.any_summed = True
                        # The batches after the one in hand wait in the stop's checkpoint.
                        self.closed = self.stopping()
            except _Dropped:
                pass
            except BaseException as error:  # raised in the loop's thread at its next call
                self.failure = error
                self.closed = True

    def _next(self) -> tuple[tuple[int, Batch], float] | None:
        """The next batch to sum and the seconds waited for it; None at the end."""
        started = time.perf_counter()
        item = self.batches.get()
        return None if item is None else (item, time.perf_counter() - started)

    def _cut_short(self, module: Any, args: Any) -> None:
        if self.closed or (self.any_summed and self.stopping()):
            raise _Dropped

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure


def _merged(parts: list[SentenceTargets | None]) -> SentenceTargets | None:
    """The sample of all ``parts`` (None without targets)."""
    if parts[0] is None:
        return None
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.merge(part)
    return merged


def encoder_threads(job: Job) -> tuple[partial[EncoderThreads], bool]:
    """The pool of one encoder thread per device of ``job``, and whether one computes on a CPU.

    The first device's encoder is the job's; each other one encodes with a copy of its model.
    """
    config = job.config
    encoders = [job.encoder] + [
        Encoder(copy.deepcopy(job.model), job.tokenizer, config.replace(device=device))
        for device in config.devices[1:]
    ]
    on_cpu = any(encoder.device.type == "cpu" for encoder in encoders)
    return partial(EncoderThreads, encoders, len(job.vocab), job.dim, config, job.targets), on_cpu
