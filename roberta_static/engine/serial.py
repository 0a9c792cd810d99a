"""The serial engine: the CPU side in a thread of this process, one encoder.

The producer thread runs a chunk or two ahead of the encoder and then waits: on the CPU a real
encoder needs every core, and the encoder releases the GIL while it computes, so segmentation,
matching and tokenization of the next chunk overlap with the model's work on the current one.
"""

from __future__ import annotations

import queue
import threading
from contextlib import AbstractContextManager, nullcontext
from functools import partial

from ..model.threads import torch_threads
from ..progress import ProgressCallback
from ..stopping import Checkpointing
from .base import Job
from .encoders import EncoderThreads
from .handover import FeederClosed, put_unless_closed
from .loop import run_pass
from .messages import Chunk, Counted, Message, Task, raise_failure
from .producer import Producer
from .state import PassState
from .worker import serve

_CHUNKS_AHEAD = 2


class SerialEngine:
    """A pass in this process: the whole corpus as one shard."""

    def start(self, stopping: Checkpointing | None) -> AbstractContextManager[None]:
        """See :class:`~.base.Engine`: nothing to start before the model loads."""
        return nullcontext()

    def run(
        self,
        job: Job,
        resume: PassState | None,
        stopping: Checkpointing | None,
        progress: ProgressCallback,
    ) -> PassState:
        """See :class:`~.base.Engine`."""
        on_cpu = job.encoder.device.type == "cpu"
        with torch_threads(on_cpu, cores_taken=0), ThreadFeeder(job.producer()) as feeder:
            pool = partial(
                EncoderThreads, [job.encoder], len(job.vocab), job.dim, job.config, job.targets
            )
            return run_pass(job, feeder, pool, resume, stopping, progress, sharded=False)


class ThreadFeeder:
    """Shard tasks run in order by one thread of this process, at most a few chunks ahead.

    Once closed, the thread stops after the chunk in hand, and nobody waits for it.
    """

    capacity = 1

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.tasks: queue.Queue[Task | None] = queue.Queue()
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

    def submit(self, task: Task) -> None:
        """Queue a task."""
        self.tasks.put(task)

    def receive(self, timeout: float) -> Chunk | Counted | None:
        """The next message, or None after ``timeout``; a task's error is raised here."""
        try:
            return raise_failure(self.results.get(timeout=timeout))
        except queue.Empty:
            if not self.thread.is_alive():
                raise RuntimeError("the producer thread ended without a result") from None
        return None

    def _main(self) -> None:
        send = partial(put_unless_closed, self.results, closed=self.closed)
        while not self.closed.is_set() and (task := self.tasks.get()) is not None:
            try:
                serve(self.producer, task, send)
            except FeederClosed:
                return
