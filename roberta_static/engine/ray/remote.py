"""What the Ray engine runs on the cluster's workers: shard tasks and encoder actors.

See :mod:`.driver` for the driver, which schedules them and merges the sums.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ...config import DistillConfig
from ...errors import RobertaStaticError
from ...model.batches import Batch
from ...model.encoder import Encoder
from ...model.pooling import Accumulator
from ...model.threads import use_threads
from ...text.shards import Shard
from ..feeding import worker_failure
from ..producer import Producer, ProducerSetup
from ..state import PassState, ShardState
from ..stats import RunStats
from ..step import add_batch


@dataclass(frozen=True)
class ChunkHeader:
    """Yielded before each chunk's batches: how far the shard has got once they are added."""

    bytes_done: int
    sentences: int


@dataclass(frozen=True)
class ShardEnd:
    """Yielded last: the shard's final state."""

    state: ShardState


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
) -> Iterator[ChunkHeader | list[Batch] | ShardEnd]:
    """A Ray generator task: each chunk's header, then its batches; the shard's end last."""
    # Arguments from Ray's object store are read-only; the pass counts contexts down in place.
    state = state.snapshot()
    with _one_line_errors():
        producer = _producer(run, setup)
        for chunk in producer.chunks(state):
            yield ChunkHeader(chunk.end_bytes, chunk.state.stats.sentences)
            yield producer.batches(chunk.inputs)
        yield ShardEnd(state)


@contextmanager
def _one_line_errors() -> Iterator[None]:
    try:
        yield
    except RobertaStaticError:
        raise
    except Exception as error:  # noqa: BLE001 (reaches the user as one line)
        raise worker_failure(error) from None


@dataclass
class _Partial:
    accumulator: Accumulator
    stats: RunStats = field(default_factory=RunStats)
    chunks: set[int] = field(default_factory=set)


class EncoderActor:
    """A Ray actor: the model on one device, summing each shard's batches apart."""

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
        self.idle_since = time.perf_counter()

    def add(self, shard: int, number: int, batches: list[Batch]) -> int:
        """Add chunk ``number`` of ``shard`` unless already added; returns the tokens encoded."""
        part = self.partial.get(shard)
        if part is None:
            part = self.partial[shard] = _Partial(
                Accumulator(self.entries, self.dim, self.encoder.device)
            )
        if number in part.chunks:
            return 0
        # An actor's calls run one at a time: the time since its last one, it waited for input.
        part.stats.encoder_wait_seconds += time.perf_counter() - self.idle_since
        tokens = part.stats.tokens
        for batch in batches:
            # Arrays from the object store are read-only, and torch warns about such arrays.
            batch = Batch(*(np.array(getattr(batch, f.name)) for f in fields(Batch)))
            add_batch(self.encoder, batch, part.accumulator, self.config, part.stats)
        part.chunks.add(number)
        self.idle_since = time.perf_counter()
        return part.stats.tokens - tokens

    def finish(self, shard: int, chunks: int) -> PassState | list[int]:
        """The shard's sums once all ``chunks`` are added, else the numbers of those missing."""
        part = self.partial.get(shard)
        missing = sorted(set(range(chunks)) - (part.chunks if part else set()))
        if missing:
            return missing
        self.partial.pop(shard, None)
        if part is None:  # a shard without any sentence to encode
            return PassState.empty(self.dim)
        return PassState.of_sums(*part.accumulator.state(), part.stats)


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
