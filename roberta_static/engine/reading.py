"""A shard's units as read and matched once: what its counting found, replayed when it is read.

A pass with ``max_contexts`` over several shards counts a shard before the shard is read (see
:mod:`.quotas`). Counting segments and matches every unit, which is most of what reading costs;
the :class:`ShardReading` it records keeps the sentences that hold an occurrence and each unit's
resume position and counters, so the shard's reading replays them instead of reading the shard
a second time. It travels from the counting task to the reading task through the pass loop, as
flat arrays and one string (the Ray engine's tasks drop it: see :mod:`.ray.tasks`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from ..text.corpus import START, Corpus, Position, TextCorpus
from ..text.vocab import MatchedSentence
from .quotas import EntryCounts


@dataclass(frozen=True)
class UnitMark:
    """A unit's text and resume position, and the corpus counters up to and including it."""

    text: str
    position: Position
    text_units: int
    bad_bytes: int
    lines_cut: int
    binary_files: int
    bytes_read: int

    def row(self) -> tuple[int, ...]:
        """Everything but the text, as integers (see :meth:`of_row`)."""
        position = self.position
        return (
            *(position.file, position.offset, position.line, position.skip),
            *(self.text_units, self.bad_bytes, self.lines_cut, self.binary_files, self.bytes_read),
        )

    @classmethod
    def at_end(cls, corpus: Corpus | TextCorpus) -> UnitMark:
        """The counters of ``corpus`` once every unit is read (no text, position or units)."""
        counts = (corpus.bad_bytes, corpus.lines_cut, len(corpus.binary_files))
        return cls("", START, 0, *counts, corpus.bytes_read)

    @classmethod
    def of_row(cls, row: Iterable[int]) -> UnitMark:
        """The mark of :meth:`row`, without its text."""
        file, offset, line, skip, *counters = row
        return cls("", Position(file, offset, line, skip), *counters)


MatchedUnit = tuple[UnitMark, int, list[MatchedSentence]]  # its sentences, those with occurrences


@dataclass(frozen=True)
class ShardReading:
    """The matched units of a whole shard, as :meth:`record` kept them.

    Attributes:
        marks: Per unit, :meth:`UnitMark.row`.
        sentences: Per unit, its sentences.
        matched: Per unit, its sentences that hold an occurrence.
        text: Those sentences' texts, one after another.
        text_ends: Where each of them ends in ``text``.
        span_counts: Per such sentence, its occurrences.
        spans: Every occurrence, ``(start_char, end_char, entry_id)`` (32-bit).
        end: The corpus counters once the shard is read (a :meth:`UnitMark.row`).
        binary_files: The files skipped as binary.

    """

    marks: np.ndarray
    sentences: np.ndarray
    matched: np.ndarray
    text: str
    text_ends: np.ndarray
    span_counts: np.ndarray
    spans: np.ndarray
    end: tuple[int, ...]
    binary_files: list[Path]

    @classmethod
    def record(cls, units: Iterable[MatchedUnit], corpus: Corpus | TextCorpus) -> ShardReading:
        """Keep ``units``, read from ``corpus`` to the shard's end."""
        marks, sentences, matched = array("q"), array("q"), array("q")
        # One string, not one per sentence: the reading crosses processes as a few buffers.
        texts: list[str] = []
        text_ends = array("q")
        end = 0
        # Offsets within a sentence (a unit is at most 100,000 characters) and entry ids fit in
        # 32 bits: half the bytes of the spans, the bulk of a reading.
        span_counts, spans = array("q"), array("i")
        for mark, count, found in units:
            marks.extend(mark.row())
            sentences.append(count)
            matched.append(len(found))
            for sentence in found:
                texts.append(sentence.text)
                end += len(sentence.text)
                text_ends.append(end)
                span_counts.append(len(sentence.spans))
                spans.extend(chain.from_iterable(sentence.spans))
        return cls(
            np.frombuffer(marks, dtype=np.int64).reshape(-1, 9),
            np.frombuffer(sentences, dtype=np.int64),
            np.frombuffer(matched, dtype=np.int64),
            "".join(texts),
            np.frombuffer(text_ends, dtype=np.int64),
            np.frombuffer(span_counts, dtype=np.int64),
            np.frombuffer(spans, dtype=np.int32).reshape(-1, 3),
            UnitMark.at_end(corpus).row(),
            list(corpus.binary_files),
        )

    def units(self) -> Iterator[MatchedUnit]:
        """The units as they were read."""
        text_ends = iter(self.text_ends.tolist())
        span_ends = iter(np.cumsum(self.span_counts).tolist())
        start = text_start = 0
        for row, count, found in zip(
            self.marks.tolist(), self.sentences.tolist(), self.matched.tolist(), strict=True
        ):
            sentences = []
            for _ in range(found):
                end, text_end = next(span_ends), next(text_ends)
                spans = list(map(tuple, self.spans[start:end].tolist()))
                sentences.append(MatchedSentence(self.text[text_start:text_end], spans))
                start, text_start = end, text_end
            yield UnitMark.of_row(row), count, sentences

    @property
    def end_mark(self) -> UnitMark:
        """The corpus counters once the shard was read."""
        return UnitMark.of_row(self.end)

    def counts(self) -> EntryCounts:
        """Occurrences of each entry in the shard."""
        return EntryCounts.of(self.spans[:, 2])
