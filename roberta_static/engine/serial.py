"""The serial engine: the CPU side in a thread of this process, one encoder.

The producer thread runs a chunk or two ahead of the encoder and then waits: on the CPU a real
encoder needs every core (MiniLM on 2 cores: 1.6x slower with one torch thread), and the encoder
releases the GIL while it computes, so segmentation, matching and tokenization of the next chunk
overlap with the model's work on the current one.
"""

from __future__ import annotations

import queue
import threading
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any

from ..model.threads import torch_threads
from ..progress import ProgressCallback
from ..stopping import Checkpointing
from .base import Job
from .feeding import FedPass, FeederClosed, put_unless_closed, raise_failure
from .producer import Producer
from .sharding import whole_corpus
from .state import PassState
from .worker import Message, serve

_POLL_SECONDS = 0.1
_CHUNKS_AHEAD = 2


class SerialEngine:
    """A pass in this process: one shard after another, in corpus order."""

    def start(self, stopping: Checkpointing | None) -> AbstractContextManager[None]:
        """See :class:`~..base.Engine`: nothing to start before the model loads."""
        return nullcontext()

    def run(
        self,
        job: Job,
        resume: PassState | None,
        stopping: Checkpointing | None,
        progress: ProgressCallback,
    ) -> PassState:
        """See :class:`~.base.Engine`."""
        entries = len(job.vocab)
        state = resume or PassState.empty(job.dim, [whole_corpus(job.corpus, entries, job.config)])
        saver = job.saver(stopping, resume)
        on_cpu = job.encoder.device.type == "cpu"
        with torch_threads(on_cpu, cores_taken=0), ThreadFeeder(job.producer(), entries) as feeder:
            return FedPass(job, [job.encoder], feeder, progress, saver).run(state)


class ThreadFeeder:
    """Shard tasks run in order by one thread of this process, at most a few chunks ahead.

    Once closed, the thread stops after the chunk in hand, and nobody waits for it.
    """

    def __init__(self, producer: Producer, entries: int) -> None:
        self.producer, self.entries = producer, entries
        self.tasks: queue.Queue[Message | None] = queue.Queue()
        self.results: queue.Queue[Message] = queue.Queue(maxsize=_CHUNKS_AHEAD)
        self.closed = threading.Event()
        self.thread = threading.Thread(
            target=self._main, name="roberta-static-producer", daemon=True
        )

    def __enter__(self) -> ThreadFeeder:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.closed.set()
        self.tasks.put(None)

    def submit(self, task: Message) -> None:
        """Queue a task."""
        self.tasks.put(task)

    def receive(self, stop: Any) -> Message | None:
        """The next message; None when ``stop`` is set first. A task's error is raised here."""
        while stop is None or not stop.is_set():
            try:
                return raise_failure(self.results.get(timeout=_POLL_SECONDS))
            except queue.Empty:
                if not self.thread.is_alive():
                    raise RuntimeError("the producer thread ended without a result") from None
        return None

    def _main(self) -> None:
        send = partial(put_unless_closed, self.results, closed=self.closed)
        while not self.closed.is_set() and (task := self.tasks.get()) is not None:
            try:
                serve(self.producer, self.entries, task, send)
            except FeederClosed:
                return
