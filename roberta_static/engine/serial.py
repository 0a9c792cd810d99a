"""The serial pass: one producer thread prepares chunks of batches, the encoder consumes them."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from typing import NoReturn

from ..config import DistillConfig
from ..errors import Interrupted
from ..model.batches import Batch
from ..model.encoder import Encoder
from ..model.pooling import Accumulator
from ..progress import PassStart, ProgressCallback, Work
from ..stopping import Checkpointing, StopNow
from ..text.corpus import corpus_identity
from ..text.vocab import Vocabulary, vocabulary_stats
from .checkpoint import CHECKPOINT_DIR, Checkpoint, save_checkpoint
from .prefetch import prefetch
from .producer import Chunk, Producer, bytes_before
from .state import PassState
from .stats import RunStats
from .step import accumulate


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
