"""The CPU side of a pass: read units, segment, match, take contexts, tokenize, batch."""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import DistillConfig
from ..model.batches import EncoderInput, EncodeStats, TargetSentence
from ..model.subwords import SubwordEncoder
from ..text.corpus import Corpus, Position, TextCorpus
from ..text.files import FileList
from ..text.segment import Segmenter, segment
from ..text.shards import Shard
from ..text.vocab import MatchedSentence, VocabMatcher, VocabPatterns
from ..vectors.targets import sentence_key
from .heap import trim_heap
from .messages import Chunk, Counted, CountShard, EncodeShard
from .quotas import Allowance, EntryCounts
from .reading import MatchedUnit, ShardReading, UnitMark
from .state import ShardState, shard_bytes
from .stats import RunStats

TOKENIZE_SENTENCES = 256
"""Sentences of a chunk tokenized together (see :class:`_ChunkInputs`)."""

if TYPE_CHECKING:
    from ..model.encoder import Encoder


class Producer:
    """The CPU side of a pass: read units, segment, match, take contexts, tokenize, batch.

    Runs in a thread beside the encoder, in a worker process, or in a Ray task.
    """

    def __init__(
        self,
        segmenter: Segmenter,
        matcher: VocabMatcher,
        subwords: SubwordEncoder,
        batch_tokens: int,
        corpus: Corpus | TextCorpus,
        config: DistillConfig,
    ) -> None:
        self.segmenter, self.matcher, self.subwords = segmenter, matcher, subwords
        self.corpus = corpus
        self.batch_tokens, self.config = batch_tokens, config

    def chunks(self, task: EncodeShard) -> Iterator[Chunk]:
        """The sentences that hold an entry to take, a chunk at a time, to the shard's end.

        With ``max_contexts``, reading ends once no entry may take more (see
        :class:`~.quotas.Allowance`). The last chunk ends where reading ended, even without a
        sentence to encode, and is ``done``. A task that carries the shard's reading (made when
        it was counted) replays it instead of reading the corpus.
        """
        state = task.state.without_leftover()
        stats, shard = state.stats, state.shard
        allowance = Allowance(task.allowance, state.taken)
        candidates = _Candidates(self.config.sentence_targets)
        chunk = _ChunkInputs(self.subwords, stats, self.config.sentence_targets > 0)
        end_bytes = 0
        reading = task.reading
        marks = _Marks(stats, self.corpus if reading is None else reading)
        units = reading.units() if reading is not None else self._units(state.position, shard.stop)
        for mark, sentences, found in units:
            state.position, end_bytes = mark.position, mark.bytes_read
            marks.count_up_to(mark)
            stats.sentences += sentences
            stats.sentences_without_entries += sentences - len(found)
            for sentence in found:
                kept = allowance.take(sentence.spans)
                if kept:
                    chunk.add(MatchedSentence(sentence.text, kept), candidates.offer(sentence))
                else:
                    stats.sentences_without_entries += 1
            if allowance.exhausted:
                stats.stopped_early = True
                break
            if chunk.sentences >= self.config.chunk_sentences:
                yield self._chunk(task.shard, chunk, state, end_bytes, False)
        else:
            end = reading.end_mark if reading is not None else UnitMark.at_end(self.corpus)
            marks.count_all(end)
            end_bytes = end.bytes_read
        yield self._chunk(task.shard, chunk, state, end_bytes, True)

    def count(self, task: CountShard) -> Counted:
        """Occurrences of each entry in a shard, and the reading that found them if asked.

        The reading is kept if the task says ``keep_reading``. Entries ``exhausted`` are left
        out of both, unless the pass keeps sentence targets (which name every entry of a
        sentence).
        """
        span = task.span
        exhausted = None if self.config.sentence_targets else task.exhausted
        units = self._units(span.start, span.stop, exhausted)
        if not task.keep_reading:
            spans = (span for _, _, found in units for sentence in found for span in sentence.spans)
            entries = np.frombuffer(array("i", (entry for _, _, entry in spans)), dtype=np.int32)
            return Counted(task.shard, EntryCounts.of(entries), None)
        reading = ShardReading.record(units, self.corpus)
        return Counted(task.shard, reading.counts(), reading)

    def _units(
        self, start: Position, stop: Position | None, exhausted: np.ndarray | None = None
    ) -> Iterator[MatchedUnit]:
        """The units from ``start`` to ``stop``: each one's mark, sentences, and those matched.

        ``exhausted``: per entry, whether its occurrences are left out.
        """
        corpus = self.corpus
        left_out = exhausted.tolist() if exhausted is not None and exhausted.any() else None

        def marked() -> Iterator[tuple[str, UnitMark]]:
            for number, (text, position) in enumerate(corpus.units(start, stop), start=1):
                counts = (corpus.bad_bytes, corpus.lines_cut, len(corpus.binary_files))
                yield text, UnitMark(text, position, number, *counts, corpus.bytes_read)

        for doc, mark in segment(self.segmenter, marked()):
            sentences = list(self.matcher(doc, mark.text))
            if left_out is not None:
                sentences = [
                    MatchedSentence(
                        sentence.text, [s for s in sentence.spans if not left_out[s[2]]]
                    )
                    for sentence in sentences
                ]
            yield mark, len(sentences), [sentence for sentence in sentences if sentence.spans]

    def _chunk(
        self, shard: int, chunk: _ChunkInputs, state: ShardState, end_bytes: int, done: bool
    ) -> Chunk:
        """The chunk of ``chunk``'s sentences (which it hands over), with the shard's state."""
        inputs, taken = chunk.take()
        trim_heap()
        return Chunk(
            shard,
            inputs,
            state.position,
            replace(state.stats),
            EntryCounts.of(taken),
            done,
            self._into_shard(state.shard, end_bytes),
        )

    def _into_shard(self, shard: Shard, end_bytes: int) -> int:
        """Corpus bytes as bytes into ``shard``: the reader's buffer runs past a shard's end."""
        if not isinstance(self.corpus, Corpus):  # texts: their size is known only as they are read
            return end_bytes
        start, end = shard_bytes(self.corpus, shard)
        return min(max(0, end_bytes - start), end - start)


@dataclass(frozen=True)
class ProducerSetup:
    """What another process needs to build the same producer (sent once, picklable)."""

    files: FileList
    sizes: array[int]
    patterns: VocabPatterns
    tokenizer_json: str
    max_length: int
    pad_id: int
    batch_tokens: int
    config: dict[str, Any]

    @classmethod
    def of(
        cls, encoder: Encoder, corpus: Corpus, patterns: VocabPatterns, config: DistillConfig
    ) -> ProducerSetup:
        """The setup of producers feeding ``encoder`` (same tokenizer, input limit and budget)."""
        return cls(
            files=corpus.files,
            sizes=corpus.sizes,
            patterns=patterns,
            tokenizer_json=encoder.subwords.backend_json(),
            max_length=encoder.max_length,
            pad_id=encoder.subwords.pad_id,
            batch_tokens=encoder.batch_tokens,
            config=config.to_dict(),
        )

    def producer(self) -> Producer:
        """The CPU side over this corpus: segmenter, matcher, subword encoder."""
        from tokenizers import Tokenizer

        config = DistillConfig(**self.config)
        segmenter = Segmenter(config.lang, config.spacy_model)
        matcher = VocabMatcher(self.patterns)
        subwords = SubwordEncoder(
            Tokenizer.from_str(self.tokenizer_json), self.max_length, self.pad_id
        )
        corpus = Corpus(self.files, config.text_field, sizes=self.sizes)
        return Producer(segmenter, matcher, subwords, self.batch_tokens, corpus, config)


def needs_torch(config: DistillConfig) -> bool:
    """Whether a producer of ``config`` may need torch.

    A spaCy pipeline loaded by name may hold models that run on it (spacy-transformers); the
    blank pipeline and the ``tokenizers`` library do not.
    """
    return config.spacy_model is not None


class _ChunkInputs:
    """A chunk's sentences, tokenized :data:`TOKENIZE_SENTENCES` at a time as they come.

    A chunk of thousands of sentences held as text and spans, then tokenized at once, took tens
    of MB of short-lived objects in the reading process, which its heap kept; a few hundred at a
    time keep the chunk as its compact inputs. Each sentence is tokenized alone, so the inputs
    are the same. ``stats``: the shard's counters, which take the tokenizer's.
    """

    def __init__(self, subwords: SubwordEncoder, stats: RunStats, with_targets: bool) -> None:
        self.subwords, self.stats, self.with_targets = subwords, stats, with_targets
        self.inputs: list[EncoderInput] = []
        self.taken: list[int] = []
        self.pending: list[MatchedSentence] = []
        self.targets: list[TargetSentence | None] = []
        self.sentences = 0  # in the chunk so far: inputs may be fewer or more (windows)

    def add(self, sentence: MatchedSentence, target: TargetSentence | None) -> None:
        """Take a sentence and the occurrences it keeps."""
        self.pending.append(sentence)
        self.targets.append(target)
        self.taken += [span[2] for span in sentence.spans]
        self.sentences += 1
        if len(self.pending) >= TOKENIZE_SENTENCES:
            self._tokenize()

    def take(self) -> tuple[list[EncoderInput], list[int]]:
        """The chunk's inputs and the entry of every occurrence taken; the next chunk starts."""
        self._tokenize()
        made = self.inputs, self.taken
        self.inputs, self.taken, self.sentences = [], [], 0
        return made

    def _tokenize(self) -> None:
        if not self.pending:
            return
        self.subwords.stats = EncodeStats()
        targets = self.targets if self.with_targets else None
        self.inputs += self.subwords.encode(self.pending, targets)
        self.stats.add(self.subwords.stats)
        self.pending, self.targets = [], []


class _Candidates:
    """The sentences of one reading whose key may still be among the ``limit`` smallest.

    The sentence targets keep the sentences with the smallest keys over the whole corpus (see
    :class:`~roberta_static.vectors.targets.SentenceTargets`); a sentence whose key is not among
    the ``limit`` smallest read so far here cannot be one of them, so its input carries none.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.largest_first: list[int] = []  # the smallest keys read, negated: a max-heap
        self.held: set[int] = set()  # the keys in the heap

    def offer(self, sentence: MatchedSentence) -> TargetSentence | None:
        """What the sentence's input carries for the targets, if it may be one.

        A sentence read again (the same key) is a candidate once: counted twice, repeats would
        crowd out distinct sentences, and the sample would depend on how the corpus is split.
        """
        if not self.limit:
            return None
        key, heap = sentence_key(sentence.text), self.largest_first
        if key in self.held:
            return None
        if len(heap) < self.limit:
            heapq.heappush(heap, -key)
        elif key < -heap[0]:
            self.held.discard(-heapq.heapreplace(heap, -key))
        else:
            return None
        self.held.add(key)
        entries, counts = np.unique([span[2] for span in sentence.spans], return_counts=True)
        return TargetSentence(key, entries.astype(np.int64), counts.astype(np.int64))


class _Marks:
    """Corpus counters attributed to units, so a checkpoint never counts read-ahead units.

    ``nlp.pipe`` reads units ahead of the Docs it yields; the counters at a Doc are those carried
    by its unit, added to what the run had counted before it resumed. ``source``: the corpus
    being read, or the reading replayed (either holds the files skipped as binary).
    """

    def __init__(self, stats: RunStats, source: Corpus | TextCorpus | ShardReading) -> None:
        self.stats, self.source = stats, source
        self.before = (stats.text_units, stats.bad_bytes, stats.lines_cut)
        self.binary_before = list(stats.binary_files_skipped)

    def count_up_to(self, mark: UnitMark) -> None:
        self._count(mark.text_units, mark.bad_bytes, mark.lines_cut, mark.binary_files)

    def count_all(self, end: UnitMark) -> None:
        """At the end of the corpus: files after the last unit count too."""
        units = self.stats.text_units - self.before[0]
        self._count(units, end.bad_bytes, end.lines_cut, end.binary_files)

    def _count(self, units: int, bad_bytes: int, lines_cut: int, binary_files: int) -> None:
        units_before, bad_before, cut_before = self.before
        self.stats.text_units = units_before + units
        self.stats.bad_bytes = bad_before + bad_bytes
        self.stats.lines_cut = cut_before + lines_cut
        if len(self.stats.binary_files_skipped) != len(self.binary_before) + binary_files:
            skipped = [str(path) for path in self.source.binary_files[:binary_files]]
            self.stats.binary_files_skipped = self.binary_before + skipped
