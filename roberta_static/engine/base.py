"""What every engine shares: the job, the two interfaces the pass loop runs over, the engine.

An engine is a pair of adapters under the one pass loop (:mod:`.loop`): a :class:`Feeder`, which
runs the CPU side over shard tasks (a thread of this process, worker processes, Ray tasks), and an
:class:`EncoderPool`, which encodes batches and sums them (encoder threads of this process, Ray
actors). Each engine takes any :class:`~.state.PassState` to resume from, whichever engine saved
it, and returns the state at the pass's end.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..config import DistillConfig
from ..model.batches import Batch
from ..model.encoder import Encoder
from ..progress import ProgressCallback
from ..stopping import Checkpointing
from ..text.corpus import Corpus, TextCorpus
from ..text.vocab import VocabMatcher, VocabPatterns, Vocabulary, vocabulary_stats
from ..vectors.targets import SentenceTargets
from .checkpoint import Saver
from .messages import Chunk, Counted, Task
from .state import PassState
from .stats import RunStats

if TYPE_CHECKING:
    from .producer import Producer


@dataclass
class Job:
    """A pass to run: the model, its encoder on the first device, the inputs and the options.

    ``targets``: with ``sentence_targets``, the empty sample the pass fills (its limit, the
    teacher's width and pooling).
    """

    model: Any
    tokenizer: Any
    encoder: Encoder
    nlp: Any
    corpus: Corpus | TextCorpus
    vocab: Vocabulary
    config: DistillConfig
    targets: SentenceTargets | None = None

    @property
    def dim(self) -> int:
        """Width of a summed vector."""
        return self.encoder.output_dim(self.config.combine)

    @cached_property
    def patterns(self) -> VocabPatterns:
        """The vocabulary's patterns, built once for every producer of the pass."""
        return VocabPatterns.of(self.nlp, self.vocab)

    def producer(self) -> Producer:
        """The CPU side in this process, sharing the encoder's subword tokenizer."""
        # spaCy's: the Ray engine's encoder actors, which import this module, need none
        from ..text.segment import Segmenter
        from .producer import Producer

        config = self.config
        segmenter = Segmenter(config.lang, config.spacy_model, self.nlp)
        matcher = VocabMatcher(self.patterns)
        subwords, budget = self.encoder.subwords, self.encoder.batch_tokens
        return Producer(segmenter, matcher, subwords, budget, self.corpus, config)

    def saver(self, stopping: Checkpointing | None, resume: PassState | None) -> Saver:
        """The pass's checkpoints (none for texts in memory, which cannot be resumed)."""
        before = resume.stats.seconds if resume is not None else 0.0
        entries, vocabulary = list(self.vocab.entries), vocabulary_stats(self.vocab)
        corpus = self.corpus if isinstance(self.corpus, Corpus) else None
        return Saver(stopping, self.config, corpus, entries, vocabulary, before)


class Feeder(Protocol):
    """Runs shard tasks on the CPU side and hands back their messages, each shard's in order.

    ``capacity``: how many tasks it runs at once.
    """

    capacity: int

    def submit(self, task: Task) -> None:
        """Start or queue ``task``."""

    def receive(self, timeout: float) -> Chunk | Counted | None:
        """The next message, or None after ``timeout`` seconds; a task's failure is raised."""


@dataclass
class Sums:
    """What an encoder pool has summed: the entries summed, their sums and counts, the batches.

    ``rows``: the entries with a count, ascending; ``sums`` (``[len(rows), dim]``, float64) and
    ``counts`` are theirs. ``tickets``: the batches summed since the pool last said (by
    :meth:`EncoderPool.summed` or here); the sums hold them and every batch before. ``targets``:
    the sentence targets those batches offered, when the pass keeps them.
    """

    rows: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    stats: RunStats
    tickets: list[int]
    targets: SentenceTargets | None = None


class EncoderPool(Protocol):
    """Encodes batches and sums their occurrence vectors per entry, in float64."""

    def restore(self, state: PassState) -> None:
        """Go on from the sums of a resumed state."""

    def offer(self, ticket: int, batch: Batch, timeout: float) -> bool:
        """Queue ``batch``, waiting up to ``timeout`` seconds for room; whether it was queued."""

    def summed(self) -> list[int]:
        """The tickets of the batches summed since the pool last said."""

    def snapshot(self) -> Sums:
        """The sums at this instant, and the tickets summed since the pool last said."""

    def tokens(self) -> int:
        """Model tokens encoded so far (resumed runs' included)."""

    def close(self) -> None:
        """Sum nothing more: batches queued or in flight are dropped."""


class Engine(Protocol):
    """Runs a pass; the serial, local and Ray engines implement it."""

    def start(self, stopping: Checkpointing | None) -> AbstractContextManager[None]:
        """What the engine starts before the model loads (worker processes), ended on exit.

        :meth:`run` runs inside it.
        """
        ...

    def run(
        self,
        job: Job,
        resume: PassState | None,
        stopping: Checkpointing | None,
        progress: ProgressCallback,
    ) -> PassState:
        """The state at the pass's end, from the start or from ``resume``.

        With ``stopping``, the state is saved now and then, and when its ``stop`` is set: then
        :class:`~roberta_static.errors.Interrupted` is raised once saved (or
        :class:`~roberta_static.stopping.StopNow` where the run had nothing new to save).
        """
        ...
