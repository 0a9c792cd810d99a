"""The CPU side of a pass: read units, segment, match, take contexts, tokenize, batch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import DistillConfig
from ..model.batches import (
    Batch,
    EncoderInput,
    EncodeStats,
    make_batches,
    pack_inputs,
    unpack_inputs,
)
from ..model.subwords import SubwordEncoder
from ..progress import Work
from ..text.corpus import Corpus, Position, TextCorpus
from ..text.segment import load_segmenter, segment
from ..text.shards import Shard
from ..text.vocab import MatchedSentence, VocabMatcher, Vocabulary
from .state import ShardState
from .stats import RunStats

if TYPE_CHECKING:
    from ..model.encoder import Encoder


@dataclass
class Chunk:
    """Encoder inputs of a chunk of sentences, and the shard's state right after that chunk.

    ``end_bytes``: the shard's bytes up to the chunk's last unit (to the end of what was read,
    for the last chunk).
    """

    inputs: list[EncoderInput]
    state: ShardState
    end_bytes: int

    @property
    def end(self) -> Work:
        """The bytes and sentences of the shard once this chunk is summed."""
        return Work(self.end_bytes, self.state.stats.sentences)

    # Worker processes hand chunks over pickled: its inputs as four flat arrays, not two arrays
    # per sentence, whose unpickling held up the encoder's process (see feed.py's hand-over).
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "inputs": pack_inputs(self.inputs)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, inputs=unpack_inputs(state["inputs"]))


class Producer:
    """The CPU side of a pass: read units, segment, match, take contexts, tokenize, batch.

    Runs in a thread beside the encoder, in a worker process, or in a Ray task.
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

    def chunks(self, state: ShardState) -> Iterator[Chunk]:
        """Batches of the sentences that still hold an entry, a chunk at a time, to the shard's end.

        ``state`` follows the reading in place. With ``max_contexts``, reading ends once no entry
        may take more, if the shard ``may_stop_early`` (a shard before the one where a pass in one
        process would end is read to its end). The last chunk ends where reading ended, even
        without a sentence to encode, and its state is ``done``.
        """
        stats, remaining = state.stats, state.remaining
        pending: list[MatchedSentence] = []
        end_bytes = 0
        marks = _Marks(self.corpus, stats)
        for doc, mark in segment(self.nlp, marks.units(state.position, state.shard.stop)):
            state.position, end_bytes = mark.position, mark.bytes_read
            marks.count_up_to(mark)
            for sentence in self.matcher(doc, mark.text):
                stats.sentences += 1
                kept = take_contexts(sentence.spans, remaining)
                if kept:
                    pending.append(MatchedSentence(sentence.text, kept))
                else:
                    stats.sentences_without_entries += 1
            if self.config.max_contexts and state.may_stop_early and not remaining.any():
                stats.stopped_early = True
                break
            if len(pending) >= self.config.chunk_sentences:
                yield self._chunk(pending, state, end_bytes)
                pending = []
        else:
            marks.count_all()
            end_bytes = self.corpus.bytes_read
        state.done = True
        yield self._chunk(pending, state, end_bytes)

    def count(self, shard: Shard, entries: int) -> np.ndarray:
        """Occurrences of each entry in ``shard`` (matching only: no tokenizing)."""
        counts = np.zeros(entries, dtype=np.int64)
        units = ((text, text) for text, _ in self.corpus.units(shard.start, shard.stop))
        for doc, text in segment(self.nlp, units):
            for sentence in self.matcher(doc, text):
                for span in sentence.spans:
                    counts[span[2]] += 1
        return counts

    def _chunk(self, pending: list[MatchedSentence], state: ShardState, end_bytes: int) -> Chunk:
        self.subwords.stats = EncodeStats()
        inputs = self.subwords.encode(pending)
        state.stats.add(self.subwords.stats)
        return Chunk(inputs, state.snapshot(), self._into_shard(state.shard, end_bytes))

    def batches(self, inputs: list[EncoderInput]) -> list[Batch]:
        """``inputs`` in padded batches to this producer's token budget."""
        return list(make_batches(inputs, self.batch_tokens, self.subwords.pad_id))

    def _into_shard(self, shard: Shard, end_bytes: int) -> int:
        """Corpus bytes as bytes into ``shard``: the reader's buffer runs past a shard's end."""
        files = getattr(self.corpus, "files", [])
        if not files:  # texts in memory: their size is known only as they are read
            return end_bytes
        start, end = shard.byte_range(files)
        return min(max(0, end_bytes - start), end - start)


@dataclass(frozen=True)
class ProducerSetup:
    """What another process needs to build the same producer (sent once, picklable)."""

    files: list[str]
    entries: list[str]
    tokenizer_json: str
    max_length: int
    pad_id: int
    batch_tokens: int
    config: dict[str, Any]

    @classmethod
    def of(
        cls, encoder: Encoder, corpus: Corpus, vocab: Vocabulary, config: DistillConfig
    ) -> ProducerSetup:
        """The setup of producers feeding ``encoder`` (same tokenizer, input limit and budget)."""
        return cls(
            files=[str(path) for path in corpus.files],
            entries=list(vocab.entries),
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
        nlp = load_segmenter(config.lang, config.spacy_model)
        matcher = VocabMatcher(nlp, Vocabulary(self.entries, config.case))
        subwords = SubwordEncoder(
            Tokenizer.from_str(self.tokenizer_json), self.max_length, self.pad_id
        )
        corpus = Corpus(self.files, config.text_field)
        return Producer(nlp, matcher, subwords, self.batch_tokens, corpus, config)


def needs_torch(config: DistillConfig) -> bool:
    """Whether a producer of ``config`` may need torch.

    A spaCy pipeline loaded by name may hold models that run on it (spacy-transformers); the
    blank pipeline and the ``tokenizers`` library do not.
    """
    return config.spacy_model is not None


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
