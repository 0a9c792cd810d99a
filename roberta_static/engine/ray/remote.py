"""What the Ray engine runs on the cluster's workers: shard tasks and encoder actors.

See :mod:`.driver` for the driver, which schedules them and merges the sums.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ...config import DistillConfig
from ...errors import RobertaStaticError
from ...model.batches import Batch, EncodeStats
from ...model.encoder import Encoder
from ...model.pooling import Accumulator, output_dim
from ...text.shards import Shard
from ..local import WorkerSetup, count_occurrences, shard_chunks, worker_failure
from ..producer import Producer
from ..state import PassState
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

    state: PassState
    encode_stats: EncodeStats


@dataclass
class ShardSums:
    """One shard's contribution: sums and counts of the entries it holds, encoder counters."""

    rows: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    stats: RunStats


# Worker side: Ray reuses worker processes, so a producer is built once per run and process.
_producers: dict[str, Producer] = {}


def _producer(run: str, setup: WorkerSetup) -> Producer:
    if run not in _producers:
        # A shard task holds one CPU: Ray sets OMP_NUM_THREADS to 1, and the subword tokenizer
        # must not spread a batch over every core either. (A runtime_env would say the same, at
        # the cost of fresh worker processes.)
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        _producers.clear()
        _producers[run] = setup.producer()
    return _producers[run]


def count_shard(run: str, setup: WorkerSetup, shard: Shard) -> np.ndarray:
    """A Ray task: occurrences of each entry in one shard (for the quotas)."""
    with _one_line_errors():
        return count_occurrences(_producer(run, setup), shard, len(setup.entries))


def produce_shard(
    run: str,
    setup: WorkerSetup,
    shard: Shard,
    state: PassState,
    encode_stats: EncodeStats,
    may_stop_early: bool,
) -> Iterator[ChunkHeader | list[Batch] | ShardEnd]:
    """A Ray generator task: each chunk's header, then its batches; the shard's end last."""
    # Arguments from Ray's object store are read-only; the pass counts contexts down in place.
    state = replace(state, remaining=state.remaining.copy())
    with _one_line_errors():
        producer = _producer(run, setup)
        for chunk, bytes_done in shard_chunks(producer, shard, state, encode_stats, may_stop_early):
            yield ChunkHeader(bytes_done, chunk.state.stats.sentences)
            yield chunk.batches
        yield ShardEnd(state, replace(producer.subwords.stats))


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
        import torch

        if device == "cpu":
            torch.set_num_threads(1)  # one core per CPU encoder; --encoders N takes N
        self.config = config.replace(device=device)
        # The model and tokenizer come as a reference in a list, which Ray passes unresolved: a
        # restarted actor fetches them again from the driver, which holds them for the run.
        *parts, tokenizer = ray.get(model[0])
        self.encoder = Encoder(_rebuilt(*parts), tokenizer, self.config)
        self.entries = entries
        self.dim = output_dim(self.encoder.hidden_size, len(self.encoder.layers), config.combine)
        self.partial: dict[int, _Partial] = {}

    def add(self, shard: int, number: int, batches: list[Batch]) -> int:
        """Add chunk ``number`` of ``shard`` unless already added; returns the tokens encoded."""
        part = self.partial.get(shard)
        if part is None:
            part = self.partial[shard] = _Partial(
                Accumulator(self.entries, self.dim, self.encoder.device)
            )
        if number in part.chunks:
            return 0
        tokens, recomputes = part.stats.tokens, self.encoder.float32_recomputes
        for batch in batches:
            # Arrays from the object store are read-only, and torch warns about such arrays.
            batch = Batch(*(np.array(getattr(batch, f.name)) for f in fields(Batch)))
            add_batch(self.encoder, batch, part.accumulator, self.config, part.stats)
        part.stats.batches_recomputed_float32 += self.encoder.float32_recomputes - recomputes
        part.chunks.add(number)
        return part.stats.tokens - tokens

    def finish(self, shard: int, chunks: int) -> ShardSums | list[int]:
        """The shard's sums once all ``chunks`` are added, else the numbers of those missing."""
        part = self.partial.get(shard)
        missing = sorted(set(range(chunks)) - (part.chunks if part else set()))
        if missing:
            return missing
        self.partial.pop(shard, None)
        if part is None:  # a shard without any sentence to encode
            empty = np.zeros(0, dtype=np.int64)
            return ShardSums(empty, np.zeros((0, self.dim)), empty, RunStats())
        sums, counts = part.accumulator.state()
        rows = np.flatnonzero(counts)
        return ShardSums(rows, sums[rows], counts[rows], part.stats)


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
