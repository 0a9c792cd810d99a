"""The Ray engine's encoder pool: encoder actors that sum batches, drained by the driver.

Each actor holds the model on one device (a GPU, or a CPU core) and sums the batches the pass
loop sends it into float64 sums of its own. Now and then the driver drains those sums into the
pass's: a drain hands over the sums since the last one with the batches they hold, so the
driver's sums, and a checkpoint of them, never wait for a batch in flight.

Faults: Ray restarts a killed actor and sends it again the calls it had not answered. A
restarted actor has lost the sums it had not handed over: the driver notices (each answer
names the actor's start), waits for the answers still due from before, and sends again the
batches not drained. An actor sums a batch once, however often it is sent.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...config import DistillConfig
from ...model.batches import Batch
from ...model.encoder import Encoder
from ...model.pooling import Accumulator
from ...model.threads import use_threads
from ...vectors.targets import SentenceTargets
from ..base import Sums
from ..encoders import empty_like
from ..state import PassState
from ..stats import RunStats
from ..step import accumulate
from .cluster import values

_IN_FLIGHT = 2  # batches sent to an actor and not answered: one computing, one waiting
_DRAIN_BATCHES = 16  # an actor's sums are drained once it has summed this many batches ...
_DRAIN_SECONDS = 2.0  # ... or this long after the last drain


@dataclass(frozen=True)
class Encoded:
    """An actor's answer to a batch: which actor start summed it, and its tokens (0: again)."""

    started: int
    ticket: int
    tokens: int


@dataclass(frozen=True)
class Drained:
    """An actor's sums since its last drain: entries ``rows``, the batches they hold.

    ``targets``: the sentence targets those batches offered, when the pass keeps them.
    """

    started: int
    tickets: list[int]
    rows: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    stats: RunStats
    targets: SentenceTargets | None = None


class EncoderActor:
    """A Ray actor: the model on one device, summing the batches it is sent."""

    def __init__(
        self,
        model: list[Any],
        config: DistillConfig,
        entries: int,
        device: str,
        targets: SentenceTargets | None = None,
    ) -> None:
        import ray

        if device == "cpu":
            use_threads(1)  # one core per CPU encoder; --encoders N takes N
        self.started = time.time_ns()  # later starts of a restarted actor are later
        self.config = config.replace(device=device)
        # The model and tokenizer come as a reference in a list, which Ray passes unresolved: a
        # restarted actor fetches them again from the driver, which holds them for the run.
        *parts, tokenizer = ray.get(model[0])
        self.encoder = Encoder(_rebuilt(*parts), tokenizer, self.config)
        self.accumulator = Accumulator(entries, self.encoder.output_dim(config.combine), device)
        self.stats = RunStats()
        self.empty_targets = targets
        self.targets = empty_like(targets)
        self.tickets: set[int] = set()  # summed since the last drain
        self.idle_since = time.perf_counter()

    def encode(self, ticket: int, batch: Batch) -> Encoded:
        """Sum one batch, unless this actor start has summed it already."""
        if ticket in self.tickets:
            return Encoded(self.started, ticket, 0)
        # An actor's calls run one at a time: the time since its last one, it waited for input.
        counted = RunStats(encoder_wait_seconds=time.perf_counter() - self.idle_since)
        encoded = self.encoder.encode(batch)
        accumulate(encoded, batch, self.accumulator, self.config, counted, self.targets)
        self.stats.add(counted)
        self.tickets.add(ticket)
        self.idle_since = time.perf_counter()
        return Encoded(self.started, ticket, batch.real_tokens)

    def drain(self) -> Drained:
        """The sums since the last drain, handed over (and zeroed here)."""
        rows, sums, counts = self.accumulator.take()
        tickets = sorted(self.tickets)
        drained = Drained(self.started, tickets, rows, sums, counts, self.stats, self.targets)
        self.tickets, self.stats, self.targets = set(), RunStats(), empty_like(self.empty_targets)
        return drained


@dataclass
class _Actor:
    """The driver's view of one actor: calls in flight, batches not drained, its start."""

    handle: Any
    encoding: dict[Any, int] = field(default_factory=dict)  # call: ticket
    draining: Any = None  # the drain call in flight
    undrained: dict[int, Batch] = field(default_factory=dict)  # kept until drained
    started: int | None = None
    recovering: bool = False  # restarted: waits for the calls made before to answer
    last_drain: float = field(default_factory=time.monotonic)

    @property
    def calls(self) -> list[Any]:
        return [*self.encoding, *([self.draining] if self.draining is not None else [])]


class RayEncoders:
    """Encoder actors on a Ray cluster: one per GPU, or ``encoders`` on CPUs.

    Args:
        ray: The ``ray`` module, connected.
        model: The model and tokenizer (``ray.put`` of :func:`model_parts` and the tokenizer).
        config: The run's options.
        entries: Vocabulary size.
        dim: Width of a summed vector.

    """

    def __init__(
        self,
        ray: Any,
        model: Any,
        config: DistillConfig,
        entries: int,
        dim: int,
        targets: SentenceTargets | None = None,
    ) -> None:
        self.ray = ray
        gpus = int(ray.cluster_resources().get("GPU", 0))
        on_gpu = gpus > 0 and config.device != "cpu"
        options = {
            # Encoders reserve no CPU: the cluster's CPUs go to the shard tasks feeding them.
            "num_cpus": 0,
            "num_gpus": 1 if on_gpu else 0,
            "max_restarts": -1,
            "max_task_retries": -1,
        }
        actor, run = ray.remote(EncoderActor), uuid.uuid4().hex
        self.actors = [
            _Actor(
                actor.options(name=f"roberta-static-{run}-encoder-{i}", **options).remote(
                    [model], config, entries, "cuda" if on_gpu else "cpu", targets
                )
            )
            for i in range(config.encoders or (gpus if on_gpu else 1))
        ]
        self.sums = np.zeros((entries, dim))
        self.counts = np.zeros(entries, dtype=np.int64)
        self.stats = RunStats()
        self.targets = empty_like(targets)
        self.drained: list[int] = []  # tickets drained since the loop last asked

    def restore(self, state: PassState) -> None:
        """Go on from a resumed state's sums."""
        self.sums, self.counts = state.dense(len(self.counts))
        self.stats = RunStats.merged([state.stats])
        if state.targets is not None:
            self.targets = state.targets

    def offer(self, ticket: int, batch: Batch, timeout: float) -> bool:
        """Send a batch to the actor with the fewest in flight, waiting up to ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            self._collect(0)
            ready = [a for a in self.actors if not a.recovering and len(a.encoding) < _IN_FLIGHT]
            if ready:
                self._encode(min(ready, key=lambda a: len(a.encoding)), ticket, batch)
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._collect(left)

    def summed(self) -> list[int]:
        """The tickets drained since the last call."""
        self._collect(0)
        drained, self.drained = self.drained, []
        return drained

    def snapshot(self) -> Sums:
        """The sums drained so far (a batch in flight or not drained is not in them)."""
        tickets = self.summed()
        stats = RunStats.merged([self.stats])
        rows = np.flatnonzero(self.counts)
        return Sums(rows, self.sums[rows], self.counts[rows], stats, tickets, self.targets)

    def tokens(self) -> int:
        """Tokens encoded in the batches drained."""
        return self.stats.tokens

    def close(self) -> None:
        """Sum nothing more: the actors end."""
        for actor in self.actors:
            self.ray.kill(actor.handle)

    def _encode(self, actor: _Actor, ticket: int, batch: Batch) -> None:
        actor.encoding[actor.handle.encode.remote(ticket, batch)] = ticket
        actor.undrained[ticket] = batch

    def _collect(self, timeout: float) -> None:
        """Take the answers that came (waiting up to ``timeout`` for one); drain when due."""
        calls = {call: actor for actor in self.actors for call in actor.calls}
        if calls and self.ray.wait(list(calls), num_returns=1, timeout=timeout)[0]:
            ready, _ = self.ray.wait(list(calls), num_returns=len(calls), timeout=0)
            for call in ready:
                self._answer(calls[call], call, values(self.ray, [call])[0])
        for actor in self.actors:
            self._recover_or_drain(actor)

    def _answer(self, actor: _Actor, call: Any, answer: Encoded | Drained) -> None:
        if isinstance(answer, Drained):
            actor.draining = None
            self._add(actor, answer)
        else:
            del actor.encoding[call]
        if actor.started is None:
            actor.started = answer.started
        elif answer.started > actor.started:  # restarted: its sums not drained are lost
            actor.started, actor.recovering = answer.started, True

    def _add(self, actor: _Actor, drained: Drained) -> None:
        self.sums[drained.rows] += drained.sums
        self.counts[drained.rows] += drained.counts
        self.stats.add(drained.stats)
        if self.targets is not None and drained.targets is not None:
            self.targets = self.targets.merge(drained.targets)
        for ticket in drained.tickets:
            actor.undrained.pop(ticket, None)
        self.drained += drained.tickets

    def _recover_or_drain(self, actor: _Actor) -> None:
        if actor.recovering:
            if actor.calls:
                return  # answers from before the restart are still due
            actor.recovering = False
            for ticket, batch in list(actor.undrained.items()):
                self._encode(actor, ticket, batch)
        if actor.draining is not None or not actor.undrained:
            return
        due = (
            len(actor.undrained) - len(actor.encoding) >= _DRAIN_BATCHES
            or time.monotonic() - actor.last_drain >= _DRAIN_SECONDS
            or not actor.encoding
        )
        if due:
            actor.draining = actor.handle.drain.remote()
            actor.last_drain = time.monotonic()


def model_parts(model: Any) -> tuple[type, Any, dict[str, Any]]:
    """A model as class, config and weights on the CPU.

    A pickled model loses what transformers 5 sets up when it builds one (the hooks that record
    hidden states), so actors build the model again from these parts.
    """
    weights = {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}
    return type(model), model.config, weights


def _rebuilt(cls: type, config: Any, weights: dict[str, Any]) -> Any:
    model = cls(config)
    model.load_state_dict(weights)
    return model.eval()
