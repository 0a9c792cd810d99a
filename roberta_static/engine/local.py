"""The local engine (``workers > 1``, or several devices): worker processes run the CPU side.

Each worker process reads, segments, matches and tokenizes one shard at a time (a
:class:`~.producer.Producer` over the shard) and sends compact numpy batches to the main process,
whose encoders (one thread per device: the model computes outside the GIL) pool and sum them into
float64 accumulators (:mod:`.feeding`). Shard states and encoder sums are values that merge in a
fixed order, so the result equals the serial pass's up to float rounding.

Workers ignore Ctrl-C, which a terminal sends to the whole process group: the main process
decides how the run stops, and ends the workers (they hold nothing a checkpoint needs).
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Any

from ..model.encoder import Encoder
from ..model.threads import torch_threads
from ..progress import ProgressCallback
from ..stopping import Checkpointing
from .base import Job
from .feeding import FedPass, Message, raise_failure, serve
from .producer import ProducerSetup
from .sharding import fresh_shards
from .state import PassState

_POLL_SECONDS = 0.1


class LocalEngine:
    """A pass with ``workers`` processes feeding one encoder per device of this machine."""

    def run(
        self,
        job: Job,
        resume: PassState | None,
        stopping: Checkpointing | None,
        progress: ProgressCallback,
    ) -> PassState:
        """See :class:`~.base.Engine`."""
        config = job.config
        encoders = [job.encoder] + [
            Encoder(copy.deepcopy(job.model), job.tokenizer, config.replace(device=device))
            for device in config.devices[1:]
        ]
        workers = config.workers or 1
        on_cpu = any(encoder.device.type == "cpu" for encoder in encoders)
        setup = ProducerSetup.of(job.encoder, job.corpus, job.vocab, config)
        with torch_threads(on_cpu, cores_taken=workers), ExitStack() as stack:
            # A stop while the workers start would cut their setup short: it waits for them.
            with stopping.uninterrupted() if stopping is not None else nullcontext():
                feeder = stack.enter_context(ProcessFeeder(setup, workers))
            saver = job.saver(stopping, resume)
            fed = FedPass(job, encoders, feeder, progress, saver, pooled=True)
            state = resume or PassState.empty(
                job.dim, fresh_shards(job.corpus, len(job.vocab), config, fed.count)
            )
            return fed.run(state)


class ProcessFeeder:
    """Worker processes taking shard tasks from one queue and sending results on another."""

    def __init__(self, setup: ProducerSetup, count: int) -> None:
        context = multiprocessing.get_context("spawn")  # fork would copy torch's threads
        self.tasks = context.Queue()
        self.results = context.Queue(maxsize=4 * count)
        self.processes = [
            context.Process(
                target=_worker_main, args=(setup, self.tasks, self.results), daemon=True
            )
            for _ in range(count)
        ]

    def __enter__(self) -> ProcessFeeder:
        # Workers run no model: one thread each, so N workers and the encoder share the cores.
        threads = _environment(
            OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false"
        )
        with threads, _interrupts_held():
            for process in self.processes:
                process.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc_info: object) -> None:
        if kind is None:  # every shard is done: the workers wait for their next task
            for _ in self.processes:
                self.tasks.put(None)
            for process in self.processes:
                process.join(timeout=5)
        else:
            # A stop or an error: the workers hold nothing worth waiting for, and tasks they
            # never read must not hold up this process's exit.
            self.tasks.cancel_join_thread()
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join()

    def submit(self, task: Message) -> None:
        """Queue a task."""
        self.tasks.put(task)

    def receive(self, stop: Any) -> Message | None:
        """The next result; None when ``stop`` is set first. A worker's error is raised here."""
        while True:
            if stop is not None and stop.is_set():
                return None
            try:
                message = self.results.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                dead = [p for p in self.processes if not p.is_alive()]
                if dead:
                    raise RuntimeError(
                        f"a worker process ended unexpectedly (exit code {dead[0].exitcode})"
                    ) from None
                continue
            return raise_failure(message)


class _environment:  # noqa: N801 (used as a context manager, like contextlib's)
    """Set environment variables for the processes started inside, then restore them."""

    def __init__(self, **values: str) -> None:
        self.values = values
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for name, value in self.values.items():
            self.saved[name] = os.environ.get(name)
            os.environ[name] = value

    def __exit__(self, *exc_info: object) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Start processes with Ctrl-C held back, so none arrives before they ignore it.

    They inherit the blocked SIGINT and ignore it first thing (see :func:`_worker_main`); here
    a SIGINT waits until the processes have started, then reaches its handler.
    """
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no process groups to fear
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _worker_main(setup: ProducerSetup, tasks: Any, results: Any) -> None:
    """A worker process: build the producer once, then run shard tasks until told to end."""
    # Ctrl-C reaches the whole process group; the main process decides how the run stops. It
    # started this process with SIGINT blocked, so one sent meanwhile is dropped here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _end_with_parent()
    producer = setup.producer()
    while (task := tasks.get()) is not None:
        serve(producer, len(setup.entries), task, results.put)


def _end_with_parent() -> None:
    """End this worker as soon as the main process ends, however it ends (a second Ctrl-C)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="roberta-static-parent", daemon=True).start()
