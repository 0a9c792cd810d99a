"""The Ray engine's feeder: shard tasks on the cluster's CPUs, their messages back to the loop.

A shard is read by a Ray generator task, which yields its chunks as it makes them (a few ahead
at most), and counted by a plain task. A task whose worker or node died is run again by the
feeder, not by Ray: Ray keeps the arguments of a generator task it may retry for as long as the
cluster runs, which on a corpus of many files filled its object store. A shard's replay makes the
same chunks and yields only those the loop has not had.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

# The shard tasks run in Ray workers of their own, started with this variable, when their CPU
# side needs no torch (see ``producer.needs_torch``): thinc then imports none, as in the local
# engine's workers, and each such worker holds that much less memory. It must come before spaCy's
# imports, which the producer's below begin. No model runs in such a worker, so its mmap
# threshold may be fixed (see ``heap.fix_mmap_threshold``).
WITHOUT_TORCH = "ROBERTA_STATIC_TASKS_WITHOUT_TORCH"
if os.environ.get(WITHOUT_TORCH) == "1":
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    from ..heap import fix_mmap_threshold

    fix_mmap_threshold()

from ...config import DistillConfig  # noqa: E402
from ...debug import keep_traceback  # noqa: E402
from ...errors import RobertaStaticError, WorkerError  # noqa: E402
from ..messages import Chunk, Counted, CountShard, EncodeShard, Task  # noqa: E402
from ..producer import Producer, ProducerSetup, needs_torch  # noqa: E402
from ..worker import worker_failure  # noqa: E402
from .cluster import first_line, our_error  # noqa: E402

_CHUNKS_AHEAD = 4  # chunks a shard task makes before the loop takes them
_RETRIES = 3  # runs again of a task whose worker or node died, as Ray's own default

# Worker side: Ray reuses worker processes, so a producer is built once per run and process.
_producers: dict[str, Producer] = {}


def _producer(run: str, setup: ProducerSetup) -> Producer:
    if run not in _producers:
        # A shard task holds one CPU: Ray sets OMP_NUM_THREADS to 1, and the subword tokenizer
        # must not spread a batch over every core either. (A runtime_env would say the same, at
        # the cost of fresh worker processes.)
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        _producers.clear()
        _producers[run] = setup.producer()
    return _producers[run]


def count_shard(run: str, setup: ProducerSetup, task: CountShard) -> Counted:
    """A Ray task: occurrences of each entry in one shard (for the quotas), without its reading.

    The shard is read again to be encoded: readings sent through Ray's object store took more
    memory than reading again takes time (see CHANGELOG.md).
    """
    with _one_line_errors():
        return _producer(run, setup).count(replace(task, keep_reading=False))


def produce_shard(
    run: str, setup: ProducerSetup, task: EncodeShard, had: int = 0
) -> Iterator[Chunk]:
    """A Ray generator task: the shard's chunks after the first ``had``, the last one ``done``."""
    with _one_line_errors():
        for number, chunk in enumerate(_producer(run, setup).chunks(task)):
            if number >= had:
                yield chunk


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """A task's errors as one line, each keeping the traceback in the task (see ``--debug``)."""
    try:
        yield
    except RobertaStaticError as error:
        keep_traceback(error, error)
        raise
    except Exception as error:  # noqa: BLE001 (reaches the user as one line)
        raise worker_failure(error) from None


@dataclass
class _Running:
    """A task on the cluster: which attempt at it this is, and the chunks the loop has had of it."""

    task: Task
    attempt: int = 1
    had: int = 0


def _lost_too_often(running: _Running, error: Exception) -> WorkerError:
    """The error of a task whose worker or node died at each of its attempts."""
    return WorkerError(
        f"shard {running.task.shard}: its Ray task's worker or node died at each of its "
        f"{running.attempt} attempts (the last: {first_line(error)})"
    )


class RayFeeder:
    """Shard tasks on a Ray cluster, one CPU each; ``capacity``: the CPUs they may hold."""

    def __init__(self, ray: Any, setup: ProducerSetup, capacity: int) -> None:
        self.ray, self.capacity = ray, capacity
        self.run = uuid.uuid4().hex
        self.setup = ray.put(setup)
        options: dict[str, Any] = {"num_cpus": 1, "max_retries": 0}
        if not needs_torch(DistillConfig(**setup.config)):
            options["runtime_env"] = {"env_vars": {WITHOUT_TORCH: "1"}}
        self.count_task = ray.remote(**options)(count_shard)
        self.produce_task = ray.remote(
            **options, _generator_backpressure_num_objects=_CHUNKS_AHEAD
        )(produce_shard)
        errors = ray.exceptions
        self.lost = (  # what Ray itself would run a task again for
            errors.WorkerCrashedError,
            errors.NodeDiedError,
            errors.LocalRayletDiedError,
            errors.OutOfMemoryError,
            errors.ObjectLostError,
        )
        self.running: dict[Any, _Running] = {}  # a task's reference (or generator)

    def submit(self, task: Task) -> None:
        """Start a task on the cluster."""
        self._start(_Running(task))

    def _start(self, running: _Running) -> None:
        task = running.task
        if isinstance(task, CountShard):
            started = self.count_task.remote(self.run, self.setup, task)
        else:
            started = self.produce_task.remote(self.run, self.setup, task, running.had)
        self.running[started] = running

    def receive(self, timeout: float) -> Chunk | Counted | None:
        """The next message of any running task, or None after ``timeout``."""
        if not self.running:
            time.sleep(timeout)
            return None
        ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=timeout)
        if not ready:
            return None
        started = ready[0]
        running = self.running[started]
        try:
            message = self._message(started, running)
        except self.ray.exceptions.RayError as error:
            del self.running[started]
            if not isinstance(error, self.lost):
                raise our_error(self.ray, error) from None
            if running.attempt > _RETRIES:
                raise _lost_too_often(running, error) from None
            self._start(replace(running, attempt=running.attempt + 1))
            return None
        if message is None or isinstance(message, Counted) or message.done:
            del self.running[started]
        return message

    def _message(self, started: Any, running: _Running) -> Chunk | Counted | None:
        """A count task's counts, or a shard task's next chunk (None: it had ended)."""
        if isinstance(running.task, CountShard):
            return self.ray.get(started)
        try:
            chunk = self.ray.get(next(started))
        except StopIteration:  # its last chunk came before
            return None
        running.had += 1
        return chunk

    def close(self) -> None:
        """Cancel the tasks still running."""
        for started in self.running:
            self.ray.cancel(started)
        self.running.clear()
