"""What every engine shares: the job it runs, the interface it offers, and how one is chosen.

An engine runs a pass: the serial one in this process (the CPU side in a thread), the local one
with worker processes, the Ray one on a cluster. Each takes any :class:`PassState` to resume
from, whichever engine saved it, and returns the state at the pass's end.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ..config import DistillConfig
from ..model.encoder import Encoder
from ..progress import ProgressCallback
from ..stopping import Checkpointing
from ..text.corpus import Corpus, TextCorpus
from ..text.vocab import VocabMatcher, Vocabulary, vocabulary_stats
from .checkpoint import Saver
from .producer import Producer
from .state import PassState


@dataclass
class Job:
    """A pass to run: the model, its encoder on the first device, the inputs and the options."""

    model: Any
    tokenizer: Any
    encoder: Encoder
    nlp: Any
    corpus: Corpus | TextCorpus
    vocab: Vocabulary
    config: DistillConfig

    @property
    def dim(self) -> int:
        """Width of a summed vector."""
        return self.encoder.output_dim(self.config.combine)

    def producer(self) -> Producer:
        """The CPU side in this process, sharing the encoder's subword tokenizer."""
        matcher = VocabMatcher(self.nlp, self.vocab)
        subwords, budget = self.encoder.subwords, self.encoder.batch_tokens
        return Producer(self.nlp, matcher, subwords, budget, self.corpus, self.config)

    def saver(self, stopping: Checkpointing | None, resume: PassState | None) -> Saver:
        """The pass's checkpoints (none for texts in memory, which cannot be resumed)."""
        before = resume.stats.seconds if resume is not None else 0.0
        entries, vocabulary = list(self.vocab.entries), vocabulary_stats(self.vocab)
        corpus = self.corpus if isinstance(self.corpus, Corpus) else None
        return Saver(stopping, self.config, corpus, entries, vocabulary, before)


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
