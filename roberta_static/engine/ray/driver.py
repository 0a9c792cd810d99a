"""The pass on a Ray cluster (``engine="ray"``): shard tasks feed encoder actors.

One Ray task per shard runs the CPU side over it (the producer a worker process of
:mod:`.local` runs) and streams its chunks of encoder inputs (a generator task). Encoder actors,
one per GPU (or ``encoders`` on CPU), hold the model: each pools the inputs of chunks from any
shard into batches as large as one process's, and sums each shard's occurrences apart, in
float64. A shard's state reaches the driver once all its chunks are summed, and the driver merges
the states in shard order: the result is the serial pass's up to float rounding.

A shard's last inputs may wait in its actor's pool for other shards' inputs: the driver asks the
actor to sum what waits once no shard feeds it any more.

Faults: Ray runs a killed shard task again (its replay yields the same chunks) and restarts a
killed actor, sending it the calls it had not answered. A restarted actor has lost its partial
sums and the inputs waiting in its pool; at the shard's end it names the chunks it has not
summed, and the driver sends them again (it keeps a shard's chunks until the shard is merged). An
actor takes a chunk number once, so nothing is lost or counted twice.

Checkpoints hold the shards merged so far and the others at the state they started from; they
are every engine's checkpoints, so any engine resumes them.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...config import DistillConfig
from ...errors import ConfigError, Interrupted, RobertaStaticError, install_hint
from ...progress import PassStart, ProgressCallback, Work
from ...stopping import Checkpointing
from ...text.shards import Shard
from ..base import Job
from ..checkpoint import Saver
from ..producer import ProducerSetup
from ..sharding import fresh_shards
from ..state import PassState, ShardState
from ..worker import worker_failure
from .remote import EncoderActor, ShardEnd, Summed, count_shard, model_parts, produce_shard

_POLL_SECONDS = 0.1
_CONNECT_SECONDS = 5
_CHUNKS_AHEAD = 4  # chunks of a shard sent to its actor and not yet taken


def import_ray() -> Any:
    """The ``ray`` module, or a one-line error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            f"the Ray engine needs Ray: {install_hint('ray')}", field="engine"
        ) from None
    return ray


class _Cancelled(Exception):
    """The run ended (an error or a stop) while this shard was under way."""


class RayPass:
    """The pass over shards on a Ray cluster: shard tasks, encoder actors, a merge in order."""

    def __init__(
        self,
        ray: Any,
        job: Job,
        report: ProgressCallback,
    ) -> None:
        config = job.config
        self.ray, self.corpus, self.config, self.report = ray, job.corpus, config, report
        self.run_id = uuid.uuid4().hex
        self.setup = ray.put(ProducerSetup.of(job.encoder, job.corpus, job.vocab, config))
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        on_gpu = gpus > 0 and config.device != "cpu"
        self.slots = config.workers or max(1, int(resources.get("CPU", 1)))
        self.model = ray.put((*model_parts(job.model), job.tokenizer))
        actor = ray.remote(EncoderActor)
        options = {
            # Encoders reserve no CPU: the cluster's CPUs go to the shard tasks feeding them.
            "num_cpus": 0,
            "num_gpus": 1 if on_gpu else 0,
            "max_restarts": -1,
            "max_task_retries": -1,
        }
        self.actors = [
            actor.options(name=f"roberta-static-{self.run_id}-encoder-{i}", **options).remote(
                [self.model], config, len(job.vocab), "cuda" if on_gpu else "cpu"
            )
            for i in range(config.encoders or (gpus if on_gpu else 1))
        ]
        # Shards each actor is fed by, shards not yet started, each shard's chunks not summed:
        # guarded by ``lock``, which is notified as they change.
        self.load = [0] * len(self.actors)
        self.starting = 0
        self.unsummed: dict[int, set[int]] = {}
        self.lock = threading.Condition()
        self.works: dict[tuple[int, int], Work] = {}  # each chunk's shard progress once summed
        task = ray.remote(num_cpus=1, max_retries=3)
        self.count_task = task(count_shard)
        self.produce_task = task(produce_shard)
        self.cancelled = threading.Event()
        # (each shard's bytes and sentences once chunks are summed, the tokens encoded)
        self.news: queue.Queue[tuple[list[tuple[int, Work]], int]] = queue.Queue()

    def count(self, shards: list[Shard], stop: Any) -> np.ndarray:
        """``[shards, entries]`` occurrences, one count task per shard."""
        refs = [self.count_task.remote(self.run_id, self.setup, shard) for shard in shards]
        while self.ray.wait(refs, num_returns=len(refs), timeout=_POLL_SECONDS)[1]:
            if stop is not None and stop.is_set():
                raise Interrupted(
                    "stopped while counting occurrences per shard, before any vector was "
                    "computed; nothing was saved"
                )
        return np.stack(self._get(refs))

    def run(self, state: PassState, saver: Saver, stopping: Checkpointing | None) -> PassState:
        """Run every unfinished shard, merging each into the state in shard order.

        Saves now and then, and when asked to stop; before the first shard is merged, a stop
        loses nothing and ends the run at once.
        """
        shards = list(state.shards)
        merged = replace(state, shards=[])
        order = [index for index, shard in enumerate(shards) if shard.pending]
        finished: dict[int, tuple[ShardState, PassState]] = {}
        files = self.corpus.files
        progress = _Progress([shard.work(files) for shard in shards], merged.stats.tokens)
        start = PassStart(self.corpus.total_bytes, progress.total(), progress.tokens)
        self.report(start.progress(progress.total(), progress.tokens))
        merged_any = False
        # Shard tasks hold the cluster's CPUs; a shard whose task has ended waits apart for its
        # last chunks to be summed.
        self.starting = len(order)
        producing = ThreadPoolExecutor(self.slots, thread_name_prefix="roberta-static-shard")
        finishing = ThreadPoolExecutor(
            max(1, len(order)), thread_name_prefix="roberta-static-shard"
        )
        try:
            futures: dict[Future, int] = {
                producing.submit(self._send, index, shards[index]): index for index in order
            }
            while futures:
                done, _ = wait(futures, timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
                self._collect(done, futures, finished, finishing)
                while order and order[0] in finished:
                    index = order.pop(0)
                    shards[index], part = finished.pop(index)
                    merged, merged_any = merged.merge(part), True
                    if stopping is not None:
                        stopping.nothing_to_lose = False
                self._report(progress, start)
                # A shard finished before an earlier one is not merged yet: its state is still
                # the one it started from, and so it is saved.
                if saver.stopping:
                    saver.stopped(replace(merged, shards=shards), merged_any)
                if merged_any and saver.due():
                    saver.save(replace(merged, shards=shards))
        finally:
            self.cancelled.set()
            # Wait for the shard threads: each sees ``cancelled`` within a poll. One still in a
            # Ray call when the cluster shuts down makes Ray end the whole process.
            for pool in (producing, finishing):
                pool.shutdown(wait=True, cancel_futures=True)
        return replace(merged, shards=shards)

    def _collect(
        self,
        done: set[Future],
        futures: dict[Future, int],
        finished: dict[int, tuple[ShardState, PassState]],
        finishing: ThreadPoolExecutor,
    ) -> None:
        """Take the shards' stages ``done``: a shard whose task ended goes on to ``finishing``."""
        for future in done:
            index = futures.pop(future)
            if isinstance(sent := future.result(), _Sent):
                futures[finishing.submit(self._finish, index, sent)] = index
            else:
                finished[index] = sent

    def _report(self, progress: _Progress, start: PassStart) -> None:
        while True:
            try:
                done, tokens = self.news.get_nowait()
            except queue.Empty:
                break
            progress.tokens += tokens
            for index, work in done:
                progress.done[index] = work
        self.report(start.progress(progress.total(), progress.tokens))

    def _send(self, index: int, entry: ShardState) -> _Sent:
        """One shard through its task, its chunks sent to the actor fed by the fewest shards."""
        with self.lock:
            which = int(np.argmin(self.load))
            self.load[which] += 1
            self.starting -= 1
            self.unsummed[index] = set()
        try:
            return _Sent(which, *self._chunks(index, entry, self.actors[which]))
        finally:
            with self.lock:
                self.load[which] -= 1
                self.lock.notify_all()

    def _chunks(self, index: int, entry: ShardState, actor: Any) -> tuple[ShardEnd, list[Any]]:
        """Send the shard's chunks to ``actor`` as its task makes them, each once it is taken.

        A resumed shard's leftover inputs come first. Returns the shard's end, and every chunk
        sent (kept until the shard is merged, in case the actor restarts).
        """
        payloads: list[Any] = []
        adds: list[Any] = []

        def add(payload: Any, done: Work | None) -> None:
            number = len(payloads)
            if done is not None:
                self.works[index, number] = done
            with self.lock:
                self.unsummed[index].add(number)
            adds.append(actor.add.remote(index, number, payload))
            payloads.append(payload)
            if len(adds) > _CHUNKS_AHEAD:
                self._took(adds.pop(0))

        if entry.leftover:
            add(self.ray.put(entry.leftover), None)
        # A shard done but for its leftover ends where it is.
        end = self._produce(entry, add) if not entry.done else ShardEnd(entry.snapshot())
        for ref in adds:
            self._took(ref)
        return end, payloads

    def _finish(self, index: int, sent: _Sent) -> tuple[ShardState, PassState]:
        """The shard's state and sums, once its actor has summed all its chunks."""
        actor = self.actors[sent.actor]
        while isinstance(sums := self._sums(index, sent), list):
            with self.lock:
                self.unsummed[index].update(sums)
            for number in sums:  # the actor restarted and lost them
                self._took(actor.add.remote(index, number, sent.payloads[number]))
        with self.lock:
            del self.unsummed[index]
        return sent.end.state, sums

    def _sums(self, index: int, sent: _Sent) -> PassState | list[int]:
        """The shard's sums, or the numbers of the chunks its actor has not summed.

        Waits until all the shard's chunks are summed, or until no shard feeds its actor any
        more: then the actor sums the inputs waiting in its pool first.
        """
        actor = self.actors[sent.actor]
        with self.lock:
            while self.unsummed[index] and (self.load[sent.actor] or self.starting):
                if self.cancelled.is_set():
                    raise _Cancelled
                self.lock.wait(_POLL_SECONDS)
            waiting = bool(self.unsummed[index])
        if waiting:
            self._took(actor.flush.remote())
        return self._get([actor.finish.remote(index, len(sent.payloads))])[0]

    def _produce(self, entry: ShardState, add: Callable[[Any, Work], None]) -> ShardEnd:
        """Run the shard's task, handing each chunk's inputs to ``add``; the shard's end."""
        chunks = self.produce_task.remote(self.run_id, self.setup, entry.snapshot())
        try:
            while not isinstance(item := self._get([self._next(chunks)])[0], ShardEnd):
                add(self._next(chunks), Work(item.bytes_done, item.sentences))
        except _Cancelled:
            self.ray.cancel(chunks)
            raise
        return item

    def _took(self, ref: Any) -> None:
        """Wait for an actor's call; then the chunks it summed are done."""
        summed: Summed = self._get([ref])[0]
        done = []
        with self.lock:
            for shard, number in summed.chunks:
                self.unsummed.get(shard, set()).discard(number)
                if (work := self.works.pop((shard, number), None)) is not None:
                    done.append((shard, work))  # a chunk sent again is done already
            self.lock.notify_all()
        self.news.put((done, summed.tokens))

    def _next(self, chunks: Any) -> Any:
        """The next object of a generator task, waiting no longer than the run lasts."""
        while not self.ray.wait([chunks], timeout=_POLL_SECONDS)[0]:
            if self.cancelled.is_set():
                raise _Cancelled
        return next(chunks)

    def _get(self, refs: list[Any]) -> list[Any]:
        """The values of ``refs``; a task's error is raised as the error it raised."""
        ray = self.ray
        while ray.wait(refs, num_returns=len(refs), timeout=_POLL_SECONDS)[1]:
            if self.cancelled.is_set():
                raise _Cancelled
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as error:
            cause = error.cause
            if isinstance(cause, RobertaStaticError):
                raise cause from None
            raise worker_failure(cause) from None
        except ray.exceptions.RayError as error:  # an actor that cannot start, a lost node
            problem = str(error).strip().splitlines()[0]
            raise ConfigError(f"the Ray cluster failed: {problem}", field="engine") from None


@dataclass
class _Sent:
    """A shard whose task has ended: its actor, its end, every chunk sent."""

    actor: int
    end: ShardEnd
    payloads: list[Any]


@dataclass
class _Progress:
    """Each shard's bytes and sentences added, and the tokens encoded (earlier runs' included)."""

    done: list[Work]
    tokens: int

    def total(self) -> Work:
        return sum(self.done, Work())


class RayEngine:
    """A pass on a Ray cluster: shard tasks feed encoder actors, shards merge in order."""

    def start(self, stopping: Checkpointing | None) -> AbstractContextManager[None]:
        """See :class:`~...base.Engine`: nothing to start before the model loads."""
        return nullcontext()

    def run(
        self,
        job: Job,
        resume: PassState | None,
        stopping: Checkpointing | None,
        progress: ProgressCallback,
    ) -> PassState:
        """See :class:`~..base.Engine`."""
        ray = check_cluster(job.config)
        saver = job.saver(stopping, resume)
        with _cluster(ray, job.config.ray_address, stopping):
            pass_ = RayPass(ray, job, progress)
            if resume is None:
                count = lambda first: pass_.count(first, saver.stop)  # noqa: E731
                shards = fresh_shards(job.corpus, len(job.vocab), job.config, count)
                resume = PassState.empty(job.dim, shards)
            return pass_.run(resume, saver, stopping)


@contextmanager
def _cluster(ray: Any, address: str | None, checkpointing: Checkpointing | None) -> Iterator[None]:
    """Ray as this process is connected to it, or joined (or started) for the run."""
    if ray.is_initialized():
        yield
        return
    # Ray's start-up cut short by a stop leaves its agent processes running: a stop waits for it.
    starting = checkpointing.uninterrupted() if checkpointing is not None else nullcontext()
    try:
        with starting:
            ray.init(address=address, logging_level=logging.WARNING, include_dashboard=False)
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = address or "a new local cluster"
        raise ConfigError(f"cannot start Ray at {where}: {error}", field="ray_address") from None
    except BaseException:
        ray.shutdown()  # stopped once started, or a second Ctrl-C: leave no Ray process behind
        raise
    try:
        yield
    finally:
        ray.shutdown()


def check_cluster(config: DistillConfig) -> Any:
    """Before the model loads: Ray is installed, and ``ray_address`` answers; returns ``ray``."""
    ray = import_ray()
    if config.ray_address is not None and not ray.is_initialized():
        _check_reachable(config.ray_address)
    return ray


def _check_reachable(address: str) -> None:
    """Refuse a ``HOST:PORT`` that nothing answers on: Ray would retry it for minutes."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return  # auto, or a scheme Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=_CONNECT_SECONDS).close()
    except OSError as error:
        raise ConfigError(
            f"nothing answers at {address} ({error.strerror or error}); start the cluster with "
            "`ray start --head` and pass the address it prints, or auto",
            field="ray_address",
        ) from None
