"""The CPU side of a pass: read units, segment, match, take contexts, tokenize, batch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..config import DistillConfig
from ..model.batches import Batch, EncodeStats, make_batches
from ..model.subwords import SubwordEncoder
from ..progress import Work
from ..text.corpus import Corpus, Position, TextCorpus, is_compressed
from ..text.segment import segment
from ..text.vocab import MatchedSentence, VocabMatcher
from .state import PassState
from .stats import RunStats


@dataclass
class Chunk:
    """Encoder batches of a chunk of sentences, and the state right after that chunk.

    ``end_bytes``: the corpus bytes up to the chunk's last unit (to the end of what was read,
    for the last chunk).
    """

    batches: list[Batch]
    state: PassState
    encode_stats: EncodeStats
    end_bytes: int

    @property
    def end(self) -> Work:
        """The bytes and sentences of the pass once this chunk is encoded."""
        return Work(self.end_bytes, self.state.stats.sentences)


class Producer:
    """The CPU side of a pass: read units, segment, match, take contexts, tokenize, batch.

    Runs in the serial pass's producer thread, or in a worker process over one shard.
    """

    def __init__(
        self,
        nlp: Any,
        matcher: VocabMatcher,
        subwords: SubwordEncoder,
        batch_tokens: int,
        corpus: Corpus | TextCorpus,
        config: DistillConfig,
    ) -> None:
        self.nlp, self.matcher, self.subwords, self.corpus = nlp, matcher, subwords, corpus
        self.batch_tokens, self.config = batch_tokens, config

    def chunks(
        self, state: PassState, stop: Position | None = None, may_stop_early: bool = True
    ) -> Iterator[Chunk]:
        """Batches of the sentences that still hold an entry, a chunk at a time, to ``stop``.

        With ``max_contexts``, reading ends once no entry may take more, if ``may_stop_early``
        (a shard before the one where the serial pass would end is read to its end). The last
        chunk ends where reading ended, even without a sentence to encode.
        """
        stats, remaining = state.stats, state.remaining
        pending: list[MatchedSentence] = []
        position, end_bytes = state.position, 0
        marks = _Marks(self.corpus, stats)
        for doc, mark in segment(self.nlp, marks.units(state.position, stop)):
            position, end_bytes = mark.position, mark.bytes_read
            marks.count_up_to(mark)
            for sentence in self.matcher(doc, mark.text):
                stats.sentences += 1
                kept = take_contexts(sentence.spans, remaining)
                if kept:
                    pending.append(MatchedSentence(sentence.text, kept))
                else:
                    stats.sentences_without_entries += 1
            if self.config.max_contexts and may_stop_early and not remaining.any():
                stats.stopped_early = True
                break
            if len(pending) >= self.config.chunk_sentences:
                yield self._chunk(pending, position, remaining, stats, end_bytes)
                pending = []
        else:
            marks.count_all()
            end_bytes = self.corpus.bytes_read
        yield self._chunk(pending, position, remaining, stats, end_bytes)

    def _chunk(
        self,
        pending: list[MatchedSentence],
        position: Position,
        remaining: np.ndarray,
        stats: RunStats,
        end_bytes: int,
    ) -> Chunk:
        inputs = self.subwords.encode(pending)
        batches = list(make_batches(inputs, self.batch_tokens, self.subwords.pad_id))
        snapshot = PassState(position, remaining.copy(), replace(stats))
        return Chunk(batches, snapshot, replace(self.subwords.stats), end_bytes)


def bytes_before(files: list[Path], position: Position) -> int:
    """Corpus bytes before ``position`` (inside a compressed file: before the file)."""
    done = sum(path.stat().st_size for path in files[: position.file])
    if position.file < len(files) and not is_compressed(files[position.file]):
        done += position.offset
    return done


def take_contexts(
    spans: list[tuple[int, int, int]], remaining: np.ndarray
) -> list[tuple[int, int, int]]:
    """Keep the occurrences whose entry has not reached ``max_contexts``, counting them down."""
    kept = []
    for span in spans:
        if remaining[span[2]] > 0:
            remaining[span[2]] -= 1
            kept.append(span)
    return kept


@dataclass(frozen=True)
class _Mark:
    """A unit's text and resume position, and the corpus counters up to and including it."""

    text: str
    position: Position
    text_units: int
    bad_bytes: int
    binary_files: int
    bytes_read: int


class _Marks:
    """Corpus counters attributed to units, so a checkpoint never counts read-ahead units.

    ``nlp.pipe`` reads units ahead of the Docs it yields; the counters at a Doc are those carried
    by its unit, added to what the run had counted before it resumed.
    """

    def __init__(self, corpus: Corpus | TextCorpus, stats: RunStats) -> None:
        self.corpus, self.stats = corpus, stats
        self.before = (stats.text_units, stats.bad_bytes, list(stats.binary_files_skipped))

    def units(self, start: Position, stop: Position | None) -> Iterator[tuple[str, _Mark]]:
        for number, (text, position) in enumerate(self.corpus.units(start, stop), start=1):
            counts = (
                number,
                self.corpus.bad_bytes,
                len(self.corpus.binary_files),
                self.corpus.bytes_read,
            )
            yield text, _Mark(text, position, *counts)

    def count_up_to(self, mark: _Mark) -> None:
        self._count(mark.text_units, mark.bad_bytes, mark.binary_files)

    def count_all(self) -> None:
        """At the end of the corpus: files after the last unit count too."""
        self._count(self.stats.text_units - self.before[0], self.corpus.bad_bytes, None)

    def _count(self, units: int, bad_bytes: int, binary_files: int | None) -> None:
        units_before, bad_before, binary_before = self.before
        self.stats.text_units = units_before + units
        self.stats.bad_bytes = bad_before + bad_bytes
        seen = len(self.corpus.binary_files) if binary_files is None else binary_files
        if len(self.stats.binary_files_skipped) != len(binary_before) + seen:  # rare: not per unit
            skipped = self.corpus.binary_files[:seen]
            self.stats.binary_files_skipped = binary_before + [str(path) for path in skipped]
