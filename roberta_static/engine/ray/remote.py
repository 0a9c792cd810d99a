"""What the Ray engine runs on the cluster's workers: shard tasks and encoder actors.

See :mod:`.driver` for the driver, which schedules them and merges the sums.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...config import DistillConfig
from ...errors import RobertaStaticError
from ...model.batches import Batch, EncoderInput
from ...model.encoder import Encoder
from ...model.pooling import Accumulator
from ...model.threads import use_threads
from ...text.shards import Shard
from ..feeding import Batcher
from ..producer import Producer, ProducerSetup
from ..state import PassState, ShardState
from ..stats import RunStats
from ..step import accumulate_rows, checked_vectors
from ..worker import worker_failure


@dataclass(frozen=True)
class ChunkHeader:
    """Yielded before each chunk's inputs: how far the shard has got once they are summed."""

    bytes_done: int
    sentences: int


@dataclass(frozen=True)
class ShardEnd:
    """Yielded last: the shard's final state."""

    state: ShardState


@dataclass(frozen=True)
class Summed:
    """What an encoder actor's call summed: the chunks it completed, and the tokens it encoded.

    ``chunks``: ``(shard, chunk number)`` of each chunk whose inputs are now all summed.
    """

    chunks: list[tuple[int, int]] = field(default_factory=list)
    tokens: int = 0


# The sums that shards whose inputs wait in an encoder actor's pool may hold, at most (float64,
# dense: 0.6 GB a shard for 100,000 entries of width 768).
_POOLED_SUMS_BYTES = 1 << 30

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


def count_shard(run: str, setup: ProducerSetup, shard: Shard) -> np.ndarray:
    """A Ray task: occurrences of each entry in one shard (for the quotas)."""
    with _one_line_errors():
        return _producer(run, setup).count(shard, len(setup.entries))


def produce_shard(
    run: str, setup: ProducerSetup, state: ShardState
) -> Iterator[ChunkHeader | list[EncoderInput] | ShardEnd]:
    """A Ray generator task: each chunk's header, then its inputs; the shard's end last."""
    # Arguments from Ray's object store are read-only; the pass counts contexts down in place.
    state = state.snapshot()
    with _one_line_errors():
        producer = _producer(run, setup)
        for chunk in producer.chunks(state):
            yield ChunkHeader(chunk.end_bytes, chunk.state.stats.sentences)
            yield chunk.inputs
        yield ShardEnd(state)


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """A task's errors as one line, each keeping the traceback in the task (see ``--debug``)."""
    from ...debug import keep_traceback

    try:
        yield
    except RobertaStaticError as error:
        keep_traceback(error, error)
        raise
    except Exception as error:  # noqa: BLE001 (reaches the user as one line)
        raise worker_failure(error) from None


@dataclass(frozen=True)
class _Chunk:
    """A chunk sent to an encoder actor, its inputs waiting in the actor's pool."""

    shard: int
    number: int
    inputs: list[EncoderInput]


@dataclass
class _Partial:
    """A shard's sums on one actor; its chunks summed, and those whose inputs wait."""

    accumulator: Accumulator
    stats: RunStats = field(default_factory=RunStats)
    chunks: set[int] = field(default_factory=set)
    pooled: set[int] = field(default_factory=set)


class EncoderActor:
    """A Ray actor: the model on one device, batching the inputs of any shard, summing each apart.

    Inputs of chunks from any shard wait in one pool (the local engine's
    :class:`~..feeding.Batcher`, whose full batches go at once) until a chunk's worth
    (``chunk_sentences``) is in, then all make batches. Each batch runs once; its occurrences
    and tokens go to the sums of the shard each row came from, so shards still merge in shard
    order.
    """

    def __init__(self, model: list[Any], config: DistillConfig, entries: int, device: str) -> None:
        import ray

        if device == "cpu":
            use_threads(1)  # one core per CPU encoder; --encoders N takes N
        self.config = config.replace(device=device)
        # The model and tokenizer come as a reference in a list, which Ray passes unresolved: a
        # restarted actor fetches them again from the driver, which holds them for the run.
        *parts, tokenizer = ray.get(model[0])
        self.encoder = Encoder(_rebuilt(*parts), tokenizer, self.config)
        self.entries = entries
        self.dim = self.encoder.output_dim(config.combine)
        self.partial: dict[int, _Partial] = {}
        # A shard's sums are dense: the pool is batched early once the shards waiting in it
        # would hold more than _POOLED_SUMS_BYTES of them.
        per_shard = Accumulator.bytes_needed(entries, self.dim)
        self.max_shards = max(1, _POOLED_SUMS_BYTES // per_shard)
        self.batcher: Batcher[_Chunk] = Batcher.for_budget(
            self.encoder.batch_tokens, self.encoder.subwords.pad_id
        )
        self.idle_since = time.perf_counter()

    def add(self, shard: int, number: int, inputs: list[EncoderInput]) -> Summed:
        """Pool chunk ``number`` of ``shard`` unless already in; sum the pool once it is full."""
        part = self.partial.get(shard)
        if part is None:
            part = self.partial[shard] = _Partial(
                Accumulator(self.entries, self.dim, self.encoder.device)
            )
        if number in part.chunks or number in part.pooled:
            return Summed()
        # An actor's calls run one at a time: the time since its last one, it waited for input.
        part.stats.encoder_wait_seconds += time.perf_counter() - self.idle_since
        part.pooled.add(number)
        # A chunk's worth waiting goes to the encoder whole, as before the Batcher held inputs:
        # a chunk counts as summed only once the pool is empty (see _sum).
        full_pool = len(self.batcher.pool) + len(inputs) >= self.config.chunk_sentences
        batches = self.batcher.add(_Chunk(shard, number, inputs), flush=full_pool)
        if len({chunk.shard for chunk, _ in self.batcher.pool}) > self.max_shards:
            batches += self.batcher.flush()
        return self._sum(batches)

    def flush(self) -> Summed:
        """Sum every input waiting: no more will come soon."""
        return self._sum(self.batcher.flush())

    def finish(self, shard: int, chunks: int) -> PassState | list[int]:
        """The shard's sums once all ``chunks`` are summed, else the numbers of those not summed.

        A chunk whose inputs wait in the pool is not summed yet; one this actor lacks (it
        restarted) is not either: the driver sends those again.
        """
        part = self.partial.get(shard)
        missing = sorted(set(range(chunks)) - (part.chunks if part else set()))
        if missing:
            return missing
        self.partial.pop(shard, None)
        if part is None:  # a shard without any sentence to encode
            return PassState.empty(self.dim)
        return PassState.of_sums(*part.accumulator.state(), part.stats)

    def _sum(self, batches: list[tuple[Batch, list[tuple[_Chunk, int]]]]) -> Summed:
        """Run ``batches``; once the pool is empty, every chunk pooled is summed."""
        tokens = sum(self._sum_batch(*batch) for batch in batches)
        chunks = []
        if not self.batcher.pool:
            for shard, part in self.partial.items():
                chunks += [(shard, number) for number in sorted(part.pooled)]
                part.chunks |= part.pooled
                part.pooled = set()
        self.idle_since = time.perf_counter()
        return Summed(chunks, tokens)

    def _sum_batch(self, batch: Batch, members: list[tuple[_Chunk, int]]) -> int:
        """Run one batch; add each row's occurrences and tokens to its shard's sums."""
        owners = np.array([chunk.shard for chunk, _ in members])
        first = self.partial[int(owners[0])].stats  # the batch (and a float32 re-run) counts once
        encoded = self.encoder.encode(batch)
        vectors = checked_vectors(encoded, self.config, first)
        first.batches += 1
        for shard in np.unique(owners):
            part = self.partial[int(shard)]
            rows = np.flatnonzero(owners == shard)
            accumulate_rows(vectors, encoded, batch, rows, part.accumulator, part.stats)
        return batch.real_tokens


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
