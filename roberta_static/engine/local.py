"""The local engine (``workers > 1``, or several devices): worker processes run the CPU side.

Each worker process reads, segments, matches and tokenizes one shard at a time (a
:class:`~.producer.Producer` over the shard) and sends its tokenized sentences, in flat numpy
arrays, to the main process, whose pass loop batches them and whose encoders (one thread per
device: the model computes outside the GIL) sum them into float64 accumulators
(:mod:`.encoders`). The result equals the serial pass's up to float rounding.

Workers (and their fork server) ignore Ctrl-C, which a terminal sends to the whole process group:
the main process decides how the run stops, and ends the workers (they hold nothing a checkpoint
needs).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from functools import partial

from ..config import DistillConfig
from ..errors import WorkerError
from ..model.threads import torch_threads
from ..progress import ProgressCallback
from ..stopping import Checkpointing
from .base import Job
from .encoders import encoder_threads
from .handover import FeederClosed, put_unless_closed
from .loop import run_pass
from .messages import Chunk, Counted, Message, Task, raise_failure
from .producer import Producer, ProducerSetup, needs_torch
from .state import PassState
from .worker import Ready, serve, worker_process

_BRIDGE_POLL_SECONDS = 0.01  # while the bridge runs, its chunks wait at most this long


class LocalEngine:
    """A pass with ``workers`` processes feeding one encoder per device of this machine.

    The worker processes take a second or more to start (spaCy's imports): :meth:`start` begins
    them before the model loads, so they are ready when the pass begins.
    """

    def __init__(self, config: DistillConfig) -> None:
        self.feeder = ProcessFeeder(config.workers or 1, without_torch=not needs_torch(config))

    @contextmanager
    def start(self, stopping: Checkpointing | None) -> Iterator[None]:
        """Start the worker processes; they end when the body does."""
        with ExitStack() as stack:
            # A stop while the processes start would cut their start short: it waits for them.
            with stopping.uninterrupted() if stopping is not None else nullcontext():
                stack.enter_context(self.feeder)
            yield

    def run(
        self,
        job: Job,
        resume: PassState | None,
        stopping: Checkpointing | None,
        progress: ProgressCallback,
    ) -> PassState:
        """See :class:`~.base.Engine`; inside :meth:`start`."""
        pool, on_cpu = encoder_threads(job)
        setup = ProducerSetup.of(job.encoder, job.corpus, job.patterns, job.config)
        self.feeder.serve(setup, job.producer)
        with torch_threads(on_cpu, cores_taken=len(self.feeder.processes)):
            return run_pass(job, self.feeder, pool, resume, stopping, progress, sharded=True)


class ProcessFeeder:
    """Worker processes taking shard tasks from one queue and sending results on another.

    Workers take a second or more to start (spaCy's imports, once in their fork server, or in
    each spawned worker; torch too where the segmenter may need it), so they start on ``with``,
    and wait for their setup until :meth:`serve`. Until one is ready, a thread of this process,
    the bridge, serves the tasks with a producer of its own (built by ``producer``), so the
    encoder starts as soon as in one process. Once a worker is ready, the bridge ends after the
    chunk in hand, and a worker reads the rest of its shard.
    """

    def __init__(self, count: int, without_torch: bool) -> None:
        self.capacity = count
        context = _worker_context(without_torch)
        self.forked = context.get_start_method() == "forkserver"
        self.tasks = context.Queue()
        # The setup (the tokenizer, large) goes by queue, not as an argument: the processes
        # start before the model that makes it is loaded (and ``start`` writes its arguments to
        # a pipe the new process reads only once it has imported what they need).
        self.setups = context.Queue()
        self.results = context.Queue(maxsize=4 * count)
        self.processes = [
            context.Process(
                target=worker_process,
                args=(self.setups, self.tasks, self.results, without_torch),
                daemon=True,
            )
            for _ in range(count)
        ]
        self.starting: threading.Thread | None = None  # starts forked workers (see __enter__)
        self.start_error: Exception | None = None
        self.ready = threading.Event()  # a worker has built its producer
        self.started: set[int] = set()  # the process ids of the ready workers
        self.closed = threading.Event()
        self.bridged: queue.Queue[Message] = queue.Queue(maxsize=2)
        self.waiting: deque[Message] = deque()
        self.bridge: threading.Thread | None = None

    def __enter__(self) -> ProcessFeeder:
        # Workers run no model: one thread each, so N workers and the encoder share the cores.
        threads = _environment(
            OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false"
        )
        with threads, _interrupts_held():
            if self.forked:
                # The server starts at once, and imports spaCy once for all workers (each start
                # waits until it has), in a thread, while the model loads.
                from multiprocessing import forkserver

                forkserver.ensure_running()
                self.starting = threading.Thread(
                    target=self._start_in_background, name="roberta-static-starter", daemon=True
                )
                self.starting.start()
            else:
                self._start_processes()
        return self

    def _start_processes(self) -> None:
        for process in self.processes:
            process.start()

    def _start_in_background(self) -> None:
        try:
            self._start_processes()
        except Exception as error:  # noqa: BLE001 (raised where the pass waits for workers)
            self.start_error = error

    def serve(self, setup: ProducerSetup, producer: Callable[[], Producer]) -> None:
        """Send the workers their setup and serve tasks from now on (the bridge starts)."""
        for _ in self.processes:
            self.setups.put(setup)
        self.bridge = threading.Thread(
            target=self._bridge, args=(producer,), name="roberta-static-bridge", daemon=True
        )
        self.bridge.start()

    def __exit__(self, kind: type[BaseException] | None, *exc_info: object) -> None:
        self.closed.set()
        self.setups.cancel_join_thread()  # a worker ended before it read its setup: no matter
        # The bridge ends at its next poll, or at the next chunk of a shard in hand: left running,
        # it could fail at the interpreter's exit, after the error the user has been shown.
        if self.bridge is not None:
            self.bridge.join()
        if self.starting is not None:
            self.starting.join()
        if kind is None:  # every shard is done: the workers wait for their next task
            self._end_ready_workers()
        else:
            # A stop or an error: the workers hold nothing worth waiting for, and tasks they
            # never read must not hold up this process's exit.
            self.tasks.cancel_join_thread()
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join()

    def _end_ready_workers(self) -> None:
        """Send every worker its end, and wait for those that are ready to take it.

        A worker still starting holds nothing: waiting for its start-up would add seconds to a
        short run. It is ended after this, once the ready ones have taken their ends (one ended
        while it waits on the task queue would keep the queue's lock from the rest).
        """
        for _ in self.processes:
            self.tasks.put(None)
        for process in self.processes:
            if process.pid in self.started:
                process.join(timeout=5)

    def submit(self, task: Task) -> None:
        """Queue a task."""
        self.tasks.put(task)

    def receive(self, timeout: float) -> Chunk | Counted | None:
        """The next result, or None after ``timeout``; a worker's error is raised here."""
        if not self.waiting:
            self._collect(timeout)
        return raise_failure(self.waiting.popleft()) if self.waiting else None

    def _collect(self, timeout: float) -> None:
        """Wait for the workers' next message; take the bridge's messages meanwhile."""
        bridging = self.bridge is not None and self.bridge.is_alive()
        try:
            message = self.results.get(
                timeout=min(timeout, _BRIDGE_POLL_SECONDS) if bridging else timeout
            )
        except queue.Empty:
            message = None
            self._check_workers()
        # The bridge's messages go first: the rest of a shard it handed over comes from a worker,
        # and must not overtake the chunks the bridge sent before.
        while not self.bridged.empty():
            self.waiting.append(self.bridged.get_nowait())
        if isinstance(message, Ready):
            self.started.add(message.pid)
            self.ready.set()
        elif message is not None:
            self.waiting.append(message)

    def _check_workers(self) -> None:
        if self.start_error is not None:
            raise self.start_error
        if self.starting is not None and self.starting.is_alive():
            return  # a process not started yet is not alive either
        ended = [p for p in self.processes if not p.is_alive()]
        if ended:
            raise WorkerError(_why_ended(ended[0], ready=ended[0].pid in self.started)) from None

    def _bridge(self, make_producer: Callable[[], Producer]) -> None:
        """Serve tasks in this process until a worker is ready; hand the shard in hand over."""
        producer = make_producer()
        send = partial(put_unless_closed, self.bridged, closed=self.closed)
        while not self.ready.is_set() and not self.closed.is_set():
            try:
                task = self.tasks.get(timeout=_BRIDGE_POLL_SECONDS)
            except queue.Empty:
                continue
            try:
                rest = serve(producer, task, send, hand_over=self.ready)
            except FeederClosed:
                return
            if rest is not None:
                self.tasks.put(rest)


def _why_ended(process: multiprocessing.process.BaseProcess, ready: bool) -> str:
    """The one line that says a worker process has ended, and what most likely ended it."""
    code = process.exitcode
    killed = code is not None and code < 0
    how = f"killed by signal {-code}" if killed else f"exit code {code}"
    if ready or code != 1:
        return f"a worker process ended unexpectedly ({how})"
    # Python's status for an uncaught error (printed above) before the worker was ready. Most
    # often a script that starts a run at import, which each worker does again; not the only
    # cause, so the advice is for scripts.
    return (
        f"a worker process failed while starting ({how}; its error is above); in a script, "
        'a run with workers must start under if __name__ == "__main__": (see "In a script" in '
        "docs/tasks/parallel.md)"
    )


def _worker_context(without_torch: bool) -> multiprocessing.context.BaseContext:
    """How worker processes start: forked from a fork server, where the platform has one.

    The server imports the CPU side once (see :mod:`.preload`), instead of each worker: on
    few cores, each worker's own imports would take CPU from the pass. It lives until this process
    ends (later runs fork from it too). Workers whose spaCy pipeline may need torch are spawned:
    the server's thinc has none. Plain fork would copy this process's torch threads.
    """
    if without_torch and "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        # Applies when the server starts. Not the main module (Python's default, which only
        # newer Pythons honour): each worker runs it, as a spawned one does, on every Python.
        context.set_forkserver_preload([f"{__package__}.preload"])
        return context
    return multiprocessing.get_context("spawn")


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

    They inherit the blocked SIGINT and ignore it first thing (see :func:`.worker.worker_main`);
    here a SIGINT waits until the processes have started, then reaches its handler.
    """
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no process groups to fear
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
