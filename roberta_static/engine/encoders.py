"""The encoder side of a pass on this machine: threads summing the shards' chunks, and a ledger.

Producers (a thread, or worker processes) send each shard's chunks in order; one thread per
encoder takes their batches from one queue (the model computes outside the GIL) and sums them
into its accumulator. The ledger knows at every instant a state the pass can resume from: each
shard's state after the last chunk it has begun to sum, with the batches of its chunks not
summed yet (its ``leftover``). So a checkpoint needs no pause, and a stop drops the batches
queued or in flight instead of waiting for them.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

import numpy as np

from ..config import DistillConfig
from ..model.batches import Batch, EncoderInput
from ..model.encoder import Encoded, Encoder
from ..model.pooling import Accumulator
from ..progress import Work
from .producer import Chunk
from .state import ShardState
from .stats import RunStats
from .step import accumulate

_POLL_SECONDS = 0.1
T = TypeVar("T")


@dataclass
class SentChunk:
    """A chunk of one shard handed to the encoders, and which of its inputs they have summed.

    ``parts``: each input's share of the bytes and sentences the chunk stands for (``work``).
    ``kept``: the inputs cannot be made again (a resumed shard's leftover), so a checkpoint keeps
    them even before any is summed.
    """

    shard: int
    state: ShardState
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
    """Which batches of which shards' chunks are summed; the pass's state at any instant.

    Args:
        shard_states: The shards as the pass starts them.
        done: What each shard had done before the pass (bytes into the shard, sentences).
        first_sum: Called once the pass has summed its first batch.

    """

    def __init__(
        self,
        shard_states: list[ShardState],
        done: list[Work],
        first_sum: Callable[[], None] = lambda: None,
    ) -> None:
        self.lock = threading.Lock()
        self.first_sum = first_sum
        self.closed = False
        self.idle = threading.Event()
        # Each shard as of its chunks summed in full; the chunks sent after them.
        self.settled = [replace(entry, leftover=[]) for entry in shard_states]
        self.sent: list[list[SentChunk]] = [[] for _ in shard_states]
        self.sent_up_to = list(done)
        self.done = list(done)
        self.summed = 0  # batches summed by this run
        self._check_idle()

    def resumed(self, shard: int, entry: ShardState) -> SentChunk:
        """The leftover batches a resumed shard holds, as the first chunk it sends."""
        chunk = SentChunk(shard, entry.snapshot(), entry.leftover, Work(), kept=True)
        with self.lock:
            self._send(chunk)
        return chunk

    def send(self, shard: int, chunk: Chunk) -> SentChunk:
        """Record the next chunk of ``shard``."""
        with self.lock:
            sent = SentChunk(shard, chunk.state, chunk.inputs, chunk.end - self.sent_up_to[shard])
            self.sent_up_to[shard] = chunk.end
            self._send(sent)
        return sent

    def _send(self, chunk: SentChunk) -> None:
        self.sent[chunk.shard].append(chunk)
        if not chunk.inputs:  # nothing to sum: done as it comes
            self.done[chunk.shard] += chunk.work
            self._settle(chunk.shard)
        self._check_idle()

    def add(self, members: Members, summing: Callable[[], None]) -> bool:
        """Run ``summing`` (a batch of ``members`` into a sum) unless the ledger is closed.

        Returns whether it ran. A snapshot never sees a batch half summed.
        """
        with self.lock:
            if self.closed:
                return False
            summing()
            self.summed += 1
            if self.summed == 1:
                self.first_sum()
            for chunk, numbers in _by_chunk(members):
                chunk.added[numbers] = True
                bytes_done, sentences_done = chunk.parts[numbers].sum(axis=0).tolist()
                self.done[chunk.shard] += Work(bytes_done, sentences_done)
            for shard in {chunk.shard for chunk, _ in members}:
                self._settle(shard)
            self._check_idle()
        return True

    def _settle(self, shard: int) -> None:
        chunks = self.sent[shard]
        while chunks and chunks[0].added.all():
            chunk = chunks.pop(0)
            self.settled[shard] = chunk.state

    def _check_idle(self) -> None:
        if any(self.sent):
            self.idle.clear()
        else:
            self.idle.set()

    def snapshot(self, result: Callable[[list[ShardState]], T]) -> tuple[list[ShardState], T]:
        """The shards' states at this instant, and ``result(states)`` computed in the same instant.

        A shard's state is the one after its last chunk begun, with the inputs not yet summed
        of the chunks up to it; chunks not begun are dropped (the shard reads them again).
        """
        with self.lock:
            states = [self._now(shard) for shard in range(len(self.settled))]
            return states, result(states)

    def states(self) -> list[ShardState]:
        """The shards' states at this instant (see :meth:`snapshot`)."""
        return self.snapshot(lambda states: None)[0]

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
        return replace(last.state, leftover=leftover)

    def close(self) -> None:
        """Sum nothing more: the batches in flight are dropped."""
        with self.lock:
            self.closed = True

    def total(self) -> Work:
        """Bytes and sentences done over all shards."""
        with self.lock:
            return sum(self.done, Work())


class _Dropped(Exception):
    """Raised inside a forward pass whose batch is dropped (the ledger closed meanwhile)."""


class EncoderThreads:
    """One thread per encoder, each summing the batches it takes into its own accumulator.

    Once the ledger is closed or ``stop`` is set, a batch in flight is cut short at its model's
    next block: a hook on each block checks, so a stop does not wait for the batch (seconds on a
    CPU). A stop closes the ledger once the batch in hand is summed.
    """

    def __init__(
        self,
        encoders: list[Encoder],
        accumulators: list[Accumulator],
        stats: list[RunStats],
        config: DistillConfig,
        ledger: Ledger,
        stop: Any = None,
    ) -> None:
        self.ledger, self.stop = ledger, stop
        self.batches: queue.Queue[tuple[Batch, Members] | None] = queue.Queue(
            maxsize=4 * len(encoders)
        )
        self.failure: BaseException | None = None
        self.hooks = [
            handle for encoder in encoders for handle in encoder.before_each_block(self._cut_short)
        ]
        self.threads = [
            threading.Thread(target=self._work, args=(*parts, config), daemon=True)
            for parts in zip(encoders, accumulators, stats, strict=True)
        ]
        for thread in self.threads:
            thread.start()

    def _work(
        self, encoder: Encoder, accumulator: Accumulator, stats: RunStats, config: DistillConfig
    ) -> None:
        while (item := self._next()) is not None:
            (batch, members), waited = item
            try:
                if self.failure is None and not self.ledger.closed:
                    counted = RunStats(encoder_wait_seconds=waited)
                    encoded = encoder.encode(batch)
                    summing = partial(_sum, encoded, batch, accumulator, config, stats, counted)
                    self.ledger.add(members, summing)
                    if self._stopping():  # the batches after the one in hand wait in a checkpoint
                        self.ledger.close()
            except _Dropped:
                pass
            except BaseException as error:  # raised in the main thread by put or wait
                self.failure = error
                self.ledger.close()
            finally:
                self.batches.task_done()

    def _next(self) -> tuple[tuple[Batch, Members], float] | None:
        """The next batch to sum and the seconds waited for it; None at the end."""
        started = time.perf_counter()
        item = self.batches.get()
        return None if item is None else (item, time.perf_counter() - started)

    def _cut_short(self, module: Any, args: Any) -> None:
        if self.ledger.closed or self._stopping():
            raise _Dropped

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def put(self, batches: list[tuple[Batch, Members]], stop: Any) -> bool:
        """Queue ``batches`` (waiting while the encoders are busy).

        Returns False, with the rest not queued, once ``stop`` is set (polled before each batch,
        and while waiting).
        """
        for item in batches:
            while not (stopped := stop is not None and stop.is_set()):
                if _put(self.batches, item):
                    break
                self._raise_failure()
            if stopped:
                return False
        return True

    def idle(self) -> bool:
        """Whether no batch waits for an encoder."""
        return self.batches.empty()

    def wait(self, stop: Any) -> bool:
        """Wait until every chunk sent is summed; False if ``stop`` is set first."""
        while not self.ledger.idle.wait(_POLL_SECONDS):
            self._raise_failure()
            if stop is not None and stop.is_set():
                return False
        self._raise_failure()
        return True

    def close(self) -> None:
        """End the threads: what is queued or in flight is dropped."""
        self.ledger.close()
        for _ in self.threads:
            self.batches.put(None)  # the threads drop what is before it at once
        for thread in self.threads:
            thread.join()
        for hook in self.hooks:
            hook.remove()

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure


def _sum(
    encoded: Encoded,
    batch: Batch,
    accumulator: Accumulator,
    config: DistillConfig,
    stats: RunStats,
    counted: RunStats,
) -> None:
    """Sum a batch and count it, in one step of the ledger (a snapshot sees both or neither)."""
    accumulate(encoded, batch, accumulator, config, counted)
    stats.add(counted)


def _by_chunk(members: Members) -> list[tuple[SentChunk, list[int]]]:
    """A batch's members grouped by chunk, in the order the chunks first appear."""
    groups: dict[int, tuple[SentChunk, list[int]]] = {}
    for chunk, number in members:
        groups.setdefault(id(chunk), (chunk, []))[1].append(number)
    return list(groups.values())


def _put(batches: queue.Queue, item: Any) -> bool:
    try:
        batches.put(item, timeout=_POLL_SECONDS)
    except queue.Full:
        return False
    return True
