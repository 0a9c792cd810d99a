"""The serial pass: one producer thread prepares chunks of batches, the encoder consumes them.

The state of a pass (input position, contexts left per entry, run statistics, and the batches of
a chunk not yet encoded) is a :class:`PassState`; a checkpoint is one saved.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from .accumulate import Accumulator
from .batching import Batch, EncodeStats, SubwordEncoder, make_batches
from .checkpoint import (
    CHECKPOINT_DIR,
    Checkpoint,
    Checkpointing,
    StopNow,
    corpus_identity,
    save_checkpoint,
)
from .config import DistillConfig
from .corpus import START, Corpus, Position, TextCorpus, is_compressed
from .encoder import Encoder
from .errors import Interrupted
from .prefetch import prefetch
from .progress import PassStart, ProgressCallback, Work
from .segment import segment
from .stats import RunStats
from .vocab import MatchedSentence, VocabMatcher, Vocabulary, vocabulary_stats


@dataclass
class PassState:
    """Where the pass is: input position, contexts left per entry, counters."""

    position: Position
    remaining: np.ndarray
    stats: RunStats
    seconds_before: float = 0.0
    leftover: list[Batch] = field(default_factory=list)

    @classmethod
    def fresh(cls, n_entries: int, config: DistillConfig) -> PassState:
        """The state before a pass reads anything."""
        remaining = np.full(n_entries, contexts_allowed(config), dtype=np.int64)
        return cls(START, remaining, RunStats(entries=n_entries))

    @classmethod
    def restore(cls, saved: Checkpoint, encoder: Encoder, accumulator: Accumulator) -> PassState:
        """A checkpoint's state; its sums and counts go back into ``accumulator``."""
        accumulator.sums.copy_(torch_from(saved.sums, accumulator.sums))
        accumulator.counts.copy_(torch_from(saved.counts, accumulator.counts))
        encoder.subwords.stats = EncodeStats(**saved.encode_stats)
        stats = RunStats(**saved.stats)
        encoder.float32_recomputes = stats.batches_recomputed_float32
        return cls(saved.position, saved.remaining.copy(), stats, stats.seconds, saved.leftover)


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


class SerialPass:
    """The pass over the corpus: a producer thread prepares chunks, the encoder consumes them."""

    def __init__(
        self,
        encoder: Encoder,
        producer: Producer,
        accumulator: Accumulator,
        config: DistillConfig,
        report: ProgressCallback,
    ) -> None:
        self.encoder, self.producer, self.corpus = encoder, producer, producer.corpus
        self.accumulator, self.config, self.report = accumulator, config, report

    def run(
        self,
        state: PassState,
        checkpointing: Checkpointing | None,
        vocab: Vocabulary,
        started: float,
    ) -> None:
        """Encode and accumulate every chunk; with ``checkpointing``, save between batches.

        Progress follows the batches encoded: each adds its share of its chunk's bytes.
        """
        stats = state.stats
        saver = _Saver(self, checkpointing, vocab, state.seconds_before, started)
        start = PassStart(
            self.corpus.total_bytes,
            Work(bytes_before(self.corpus.files, state.position), stats.sentences),
            stats.tokens,
        )
        chunks: Iterator[Chunk] = prefetch(self.producer.chunks(state))
        if state.leftover:
            resumed = Chunk(
                state.leftover,
                replace(state, stats=replace(stats)),
                self.encoder.subwords.stats,
                start.done.bytes,
            )
            chunks = itertools.chain([resumed], chunks)
        done_chunk: Chunk | None = None
        done = start.done
        self.report(start.progress(done, stats.tokens))
        while True:
            try:
                # Waiting for the producer may be cut short too: the chunks before are all done.
                with saver.computing():
                    chunk = next(chunks, None)
            except StopNow:
                saver.stop_now(done_chunk, [], stats)
            if chunk is None:
                break
            parts = (chunk.end - done).split([batch.real_tokens for batch in chunk.batches])
            for number, (batch, part) in enumerate(zip(chunk.batches, parts, strict=True)):
                try:
                    with saver.computing():
                        hidden = self.encoder.hidden_states(batch)
                except StopNow:
                    saver.stop_now(chunk, chunk.batches[number:], stats)
                accumulate(hidden, batch, self.accumulator, self.config, stats)
                done += part
                self.report(start.progress(done, stats.tokens))
                saver.after_batch(chunk, chunk.batches[number + 1 :], stats)
            done, done_chunk = chunk.end, chunk
        self.report(start.progress(done, stats.tokens))
        stats.add_encode_stats(self.encoder.subwords.stats)
        stats.batches_recomputed_float32 = self.encoder.float32_recomputes


class _Saver:
    """Checkpoints between batches: every ``every_seconds``, and when asked to stop."""

    def __init__(
        self,
        pass_: SerialPass,
        checkpointing: Checkpointing | None,
        vocab: Vocabulary,
        seconds_before: float,
        started: float,
    ) -> None:
        self.pass_, self.checkpointing, self.vocab = pass_, checkpointing, vocab
        self.seconds_before, self.started = seconds_before, started
        self.last_saved = time.monotonic()
        self.added_any = False

    @contextmanager
    def computing(self) -> Iterator[None]:
        """Around the encoder's work on a batch: a stop may cut it short (see ``stop_now``)."""
        if self.checkpointing is None:
            yield
            return
        with self.checkpointing.computing():
            yield

    def after_batch(self, chunk: Chunk, leftover: list[Batch], stats: RunStats) -> None:
        """Save when due or stopping; on a stop, raise :class:`Interrupted` once saved."""
        self.added_any = True
        checkpointing = self.checkpointing
        if checkpointing is None:
            return
        stop = checkpointing.stop is not None and checkpointing.stop.is_set()
        every = checkpointing.every_seconds
        if not stop and not (every and time.monotonic() - self.last_saved >= every):
            return
        self._save(checkpointing, chunk, leftover, stats)
        self.last_saved = time.monotonic()
        if stop:
            raise stopped(checkpointing)

    def stop_now(self, chunk: Chunk | None, leftover: list[Batch], stats: RunStats) -> NoReturn:
        """A stop cut a batch short: save with that batch still to do, unless nothing was added.

        Raises:
            StopNow: This run added no batch, so there is nothing new to save.
            Interrupted: Saved.

        """
        if chunk is None or not self.added_any or self.checkpointing is None:
            raise StopNow
        self._save(self.checkpointing, chunk, leftover, stats)
        raise stopped(self.checkpointing)

    def _save(
        self, checkpointing: Checkpointing, chunk: Chunk, leftover: list[Batch], stats: RunStats
    ) -> None:
        pass_ = self.pass_
        # Producer-side counters come from the chunk's snapshot; the encoder's from the live stats.
        saved_stats = replace(
            chunk.state.stats,
            tokens=stats.tokens,
            padded_tokens=stats.padded_tokens,
            batches_recomputed_float32=pass_.encoder.float32_recomputes,
            seconds=self.seconds_before + time.perf_counter() - self.started,
        )
        position = chunk.state.position
        save_checkpoint(
            checkpointing.folder,
            Checkpoint(
                config=pass_.config.to_dict(),
                files=[str(path.resolve()) for path in pass_.corpus.files],
                corpus=corpus_identity(pass_.corpus.files, position),
                entries=list(self.vocab.entries),
                position=position,
                stats=asdict(replace(saved_stats, vocabulary=vocabulary_stats(self.vocab))),
                encode_stats=asdict(chunk.encode_stats),
                sums=pass_.accumulator.sums.cpu().numpy(),
                counts=pass_.accumulator.counts.cpu().numpy(),
                remaining=chunk.state.remaining,
                leftover=leftover,
            ),
        )
        checkpointing.written = True


def stopped(checkpointing: Checkpointing) -> Interrupted:
    """The error a stopped run ends with, once its checkpoint is saved."""
    return Interrupted(
        f"stopped; checkpoint in {checkpointing.folder / CHECKPOINT_DIR}; "
        f"resume with: roberta-static distill --resume {checkpointing.folder}"
    )


def bytes_before(files: list[Path], position: Position) -> int:
    """Corpus bytes before ``position`` (inside a compressed file: before the file)."""
    done = sum(path.stat().st_size for path in files[: position.file])
    if position.file < len(files) and not is_compressed(files[position.file]):
        done += position.offset
    return done


def torch_from(array: np.ndarray, like: Any) -> Any:
    """A numpy array as a tensor on the device of ``like``."""
    import torch

    return torch.from_numpy(array).to(like.device)


def contexts_allowed(config: DistillConfig) -> int:
    """Occurrences each entry may contribute: ``max_contexts``, or all of them when 0."""
    return config.max_contexts or int(np.iinfo(np.int64).max)


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


def add_batch(
    encoder: Encoder, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Run the encoder on one batch and accumulate its occurrences."""
    accumulate(encoder.hidden_states(batch), batch, accumulator, config, stats)


def accumulate(
    hidden: Any, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Add one batch's hidden states at its occurrences, and count its tokens."""
    accumulator.add(hidden, batch, config.pool, config.combine)
    stats.tokens += batch.real_tokens
    stats.padded_tokens += int(batch.input_ids.size)


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
