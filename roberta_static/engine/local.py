"""The parallel pass (``workers > 1``): worker processes run the CPU side over shards.

Each worker process reads, segments, matches and tokenizes one shard at a time (a
:class:`~.producer.Producer` over the shard) and sends compact numpy batches to the
main process, whose encoders (one thread per device: the model computes outside the GIL) pool
and sum them into float64 accumulators (:mod:`.encoders`). Shard states and encoder
sums are values that merge in a fixed order, so the result equals the serial pass's up to float
rounding.

Workers ignore Ctrl-C, which a terminal sends to the whole process group: the main process
decides how the run stops, and ends the workers (they hold nothing a checkpoint needs).

``max_contexts`` keeps meaning "the first N occurrences in corpus order": a counting pass gives each
shard's occurrences per entry, and shard ``i`` may take ``clamp(N - earlier shards' count, 0, ...)``
of each. That pass segments the corpus a second time (about 1.6x the CPU work); ``max_contexts=0``
skips it.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from ..config import DistillConfig
from ..errors import CorpusError, Interrupted, RobertaStaticError
from ..model.batches import EncodeStats
from ..model.encoder import Encoder
from ..model.pooling import Accumulator, output_dim
from ..model.subwords import SubwordEncoder
from ..progress import PassStart, ProgressCallback, Work
from ..stopping import Checkpointing
from ..text.corpus import Corpus, Position, corpus_identity
from ..text.segment import load_segmenter, segment
from ..text.shards import Shard, plan_shards
from ..text.vocab import VocabMatcher, Vocabulary, vocabulary_stats
from .checkpoint import Checkpoint, save_checkpoint
from .encoders import EncoderThreads, Ledger, ShardState
from .producer import Chunk, Producer
from .serial import stopped
from .sharding import fresh_shards, occurring
from .state import PassState
from .stats import RunStats
from .step import torch_from

_POLL_SECONDS = 0.1


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker process needs to build its producer (sent once, picklable)."""

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
    ) -> WorkerSetup:
        """The setup of workers feeding ``encoder`` (same tokenizer, input limit and budget)."""
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


class ParallelPass:
    """The pass over shards with worker processes and one or more encoders."""

    def __init__(
        self,
        encoders: list[Encoder],
        corpus: Corpus,
        vocab: Vocabulary,
        config: DistillConfig,
        report: ProgressCallback,
        workers: int,
    ) -> None:
        self.encoders, self.corpus, self.vocab = encoders, corpus, vocab
        self.config, self.report, self.workers = config, report, workers
        self.started, self.seconds_before = time.perf_counter(), 0.0
        self.encoder_stats = [RunStats() for _ in encoders]
        self.accumulators = [
            Accumulator(len(vocab), _dim(encoders[0], config), e.device) for e in encoders
        ]
        self.setup = WorkerSetup.of(encoders[0], corpus, vocab, config)

    def __enter__(self) -> ParallelPass:
        self.pool = _Workers(self.setup, self.workers).__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.pool.__exit__(*exc_info)

    def count(self, shards: list[Shard], stop: Any = None) -> np.ndarray:
        """``[shards, entries]`` occurrences of each entry in each shard (the quota pass)."""
        counts = np.zeros((len(shards), len(self.vocab)), dtype=np.int64)
        for index, shard in enumerate(shards):
            self.pool.tasks.put(("count", index, shard))
        for _ in shards:
            message = self.pool.receive(stop)
            if message is None:
                raise Interrupted(
                    "stopped while counting occurrences per shard, before any vector was "
                    "computed; nothing was saved"
                )
            _, index, found = message
            counts[index] = found
        return counts

    def run(
        self, shard_states: list[ShardState], checkpointing: Checkpointing | None = None
    ) -> list[ShardState]:
        """Run every unfinished shard to its end; the shards' final states.

        With ``checkpointing``, saves the state of the moment every ``every_seconds`` without
        pausing anything, and when ``stop`` is set: then the batches queued or in flight are
        dropped (they wait in the checkpoint) and :class:`Interrupted` is raised once saved.
        """
        files = self.corpus.files
        ledger = Ledger(
            shard_states,
            [Work(entry.bytes_done(files), entry.state.stats.sentences) for entry in shard_states],
        )
        start = PassStart(self.corpus.total_bytes, ledger.total(), self._tokens())
        encoding = EncoderThreads(
            self.encoders, self.accumulators, self.encoder_stats, self.config, ledger
        )
        try:
            self.report(start.progress(ledger.total(), self._tokens()))
            finished = self._run(shard_states, ledger, encoding, start, checkpointing)
            if not finished and checkpointing is not None:
                self._save(checkpointing, ledger)  # stopped: raises Interrupted once saved
            return ledger.states()
        finally:
            encoding.close()

    def _run(
        self,
        shard_states: list[ShardState],
        ledger: Ledger,
        encoding: EncoderThreads,
        start: PassStart,
        checkpointing: Checkpointing | None,
    ) -> bool:
        """Send the shards to the workers and their batches to the encoders until all are summed.

        Returns False when a stop comes first.
        """
        stop = checkpointing.stop if checkpointing is not None else None
        every = checkpointing.every_seconds if checkpointing is not None else 0.0
        pool, open_shards = self.pool, set()
        for index, entry in enumerate(shard_states):
            if entry.leftover and not encoding.put(ledger.resumed(index, entry), stop):
                return False
            if not entry.done:
                task = (entry.shard, entry.state, entry.encode_stats, entry.may_stop_early)
                pool.tasks.put(("encode", index, *task))
                open_shards.add(index)
        saved_at = time.monotonic()
        while open_shards:
            message = pool.receive(stop)
            if message is None:
                return False
            _, index, batches, state, encode_stats, end_bytes, last = message
            chunk = ledger.send(index, state, encode_stats, batches, end_bytes, last)
            if last:
                open_shards.discard(index)
            if not encoding.put(chunk, stop):
                return False
            self.report(start.progress(ledger.total(), self._tokens()))
            if checkpointing is not None and every and time.monotonic() - saved_at >= every:
                self._save(checkpointing, ledger)
                saved_at = time.monotonic()
        done = encoding.wait(stop)
        self.report(start.progress(ledger.total(), self._tokens()))
        return done

    def _tokens(self) -> int:
        return sum(stats.tokens for stats in self.encoder_stats)

    def _save(self, checkpointing: Checkpointing, ledger: Ledger) -> None:
        """Save the state of this instant (see :meth:`Ledger.snapshot`)."""
        states, result = ledger.snapshot(self.result)
        result[2].seconds += time.perf_counter() - self.started
        save_shards(checkpointing, self.config, self.corpus, self.vocab, states, result)

    def result(self, shard_states: list[ShardState]) -> tuple[np.ndarray, np.ndarray, RunStats]:
        """Sums, counts and statistics, merged in a fixed order (encoders, then shards)."""
        states = [accumulator.state() for accumulator in self.accumulators]
        sums = np.sum([sums for sums, _ in states], axis=0)
        counts = np.sum([counts for _, counts in states], axis=0)
        stats = merged_stats(shard_states)
        stats.tokens = self._tokens()
        stats.padded_tokens = sum(s.padded_tokens for s in self.encoder_stats)
        stats.batches_recomputed_float32 = sum(e.float32_recomputes for e in self.encoders)
        stats.seconds = self.seconds_before
        return sums, counts, stats


def merged_stats(shard_states: list[ShardState]) -> RunStats:
    """The producers' statistics of every shard, merged in shard order."""
    stats = RunStats.merged([entry.state.stats for entry in shard_states])
    stats.add_encode_stats(EncodeStats.merged([entry.encode_stats for entry in shard_states]))
    return stats


def _dim(encoder: Encoder, config: DistillConfig) -> int:
    return output_dim(encoder.hidden_size, len(encoder.layers), config.combine)


class _Workers:
    """Worker processes taking shard tasks from one queue and sending results on another."""

    def __init__(self, setup: WorkerSetup, count: int) -> None:
        context = multiprocessing.get_context("spawn")  # fork would copy torch's threads
        self.tasks = context.Queue()
        self.results = context.Queue(maxsize=4 * count)
        self.processes = [
            context.Process(
                target=_worker_main, args=(setup, self.tasks, self.results), daemon=True
            )
            for _ in range(count)
        ]

    def __enter__(self) -> _Workers:
        # Workers run no model: one thread each, so N workers and the encoder share the cores.
        threads = _environment(
            OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false"
        )
        with threads, _interrupts_held():
            for process in self.processes:
                process.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc_info: object) -> None:
        if kind is None:  # every shard is done: the workers wait for their next task
            for _ in self.processes:
                self.tasks.put(None)
            for process in self.processes:
                process.join(timeout=5)
        else:
            # A stop or an error: the workers hold nothing worth waiting for, and tasks they
            # never read must not hold up this process's exit.
            self.tasks.cancel_join_thread()
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join()

    def receive(self, stop: Any) -> tuple | None:
        """The next result; None when ``stop`` is set first. A worker's error is raised here."""
        while True:
            if stop is not None and stop.is_set():
                return None
            try:
                message = self.results.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                dead = [p for p in self.processes if not p.is_alive()]
                if dead:
                    raise RuntimeError(
                        f"a worker process ended unexpectedly (exit code {dead[0].exitcode})"
                    ) from None
                continue
            if message[0] == "error":
                raise message[2]
            return message


class _environment:  # noqa: N801 (used as a context manager, like contextlib's)
    """Set environment variables for the processes started inside, then restore them."""

    def __init__(self, **values: str) -> None:
        self.values = values
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for name, value in self.values.items():
            self.saved[name] = os.environ.get(name)
            os.environ[name] = value

    def __exit__(self, *exc_info: object) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Start processes with Ctrl-C held back, so none arrives before they ignore it.

    They inherit the blocked SIGINT and ignore it first thing (see :func:`_worker_main`); here
    a SIGINT waits until the processes have started, then reaches its handler.
    """
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no process groups to fear
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _worker_main(setup: WorkerSetup, tasks: Any, results: Any) -> None:
    """A worker process: build the producer once, then run shard tasks until told to end."""
    # Ctrl-C reaches the whole process group; the main process decides how the run stops. It
    # started this process with SIGINT blocked, so one sent meanwhile is dropped here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _end_with_parent()
    producer = setup.producer()
    while (task := tasks.get()) is not None:
        index = task[1]
        try:
            if task[0] == "count":
                counts = count_occurrences(producer, task[2], len(setup.entries))
                results.put(("counted", index, counts))
            else:
                _encode(producer, results, *task[1:])
        except RobertaStaticError as error:
            results.put(("error", index, error))
        except Exception as error:  # noqa: BLE001 (reaches the user as one line)
            results.put(("error", index, worker_failure(error)))


def _end_with_parent() -> None:
    """End this worker as soon as the main process ends, however it ends (a second Ctrl-C)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="roberta-static-parent", daemon=True).start()


def worker_failure(error: Exception) -> CorpusError:
    """An unexpected error in a worker, as the one-line error the user sees."""
    return CorpusError(f"worker failed: {type(error).__name__}: {error}")


def count_occurrences(producer: Producer, shard: Shard, entries: int) -> np.ndarray:
    """Occurrences of each of the ``entries`` in ``shard`` (matching only: no tokenizing)."""
    counts = np.zeros(entries, dtype=np.int64)
    units = ((text, text) for text, _ in producer.corpus.units(shard.start, shard.stop))
    for doc, text in segment(producer.nlp, units):
        for sentence in producer.matcher(doc, text):
            for span in sentence.spans:
                counts[span[2]] += 1
    return counts


def shard_chunks(
    producer: Producer,
    shard: Shard,
    state: PassState,
    encode_stats: EncodeStats,
    may_stop_early: bool = True,
) -> Iterator[tuple[Chunk, int]]:
    """The chunks of ``shard`` from ``state`` on, each with its end in bytes into the shard.

    ``may_stop_early``: see :meth:`Producer.chunks`.

    ``state`` follows the pass in place; once exhausted, ``producer.subwords.stats`` holds the
    shard's encoding counters.
    """
    producer.subwords.stats = replace(encode_stats)
    start, end = shard.byte_range(producer.corpus.files)
    for chunk in producer.chunks(state, shard.stop, may_stop_early):
        # The reader's buffer runs past the shard's end: count what lies inside it.
        yield chunk, min(max(0, chunk.end_bytes - start), end - start)


def _encode(
    producer: Producer,
    results: Any,
    index: int,
    shard: Shard,
    state: PassState,
    encode_stats: EncodeStats,
    may_stop_early: bool,
) -> None:
    """Send the shard's chunks, then its final state (a message with no batches)."""
    end_bytes = 0
    for chunk, end_bytes in shard_chunks(producer, shard, state, encode_stats, may_stop_early):
        message = (chunk.batches, chunk.state, chunk.encode_stats, end_bytes, False)
        results.put(("chunk", index, *message))
    # The producer updated ``state`` in place to the shard's end.
    results.put(("chunk", index, [], state, replace(producer.subwords.stats), end_bytes, True))


def run_parallel(
    encoders: list[Encoder],
    corpus: Corpus,
    vocab: Vocabulary,
    config: DistillConfig,
    report: ProgressCallback,
    checkpointing: Checkpointing | None,
    resume_from: Checkpoint | None,
) -> tuple[np.ndarray, np.ndarray, RunStats, np.ndarray]:
    """The parallel pass from the start or from a checkpoint.

    Returns:
        Summed vectors (float64), counts, merged statistics, and which entries occur at all.

    """
    workers = config.workers or 1
    stop = checkpointing.stop if checkpointing is not None else None
    with ExitStack() as stack:
        # A stop while the workers start would cut their setup short: it waits for them.
        starting = checkpointing.uninterrupted() if checkpointing is not None else nullcontext()
        with starting:
            pass_ = stack.enter_context(
                ParallelPass(encoders, corpus, vocab, config, report, workers)
            )
        if resume_from is not None:
            shard_states = restore_shards(resume_from, pass_)
        else:
            shards = plan_shards(corpus.files)
            shard_states = fresh_shards(
                shards, len(vocab), config, lambda first: pass_.count(first, stop)
            )
        if checkpointing is not None:
            # From here a stop saves the work done (the encoders are threads of this process).
            checkpointing.nothing_to_lose = False
        shard_states = pass_.run(shard_states, checkpointing)
    sums, counts, stats = pass_.result(shard_states)
    return sums, counts, stats, occurring(shard_states)


def save_shards(
    checkpointing: Checkpointing,
    config: DistillConfig,
    corpus: Corpus,
    vocab: Vocabulary,
    shard_states: list[ShardState],
    result: tuple[np.ndarray, np.ndarray, RunStats],
) -> None:
    """Save the shard states with the ``result`` (sums, counts, statistics) of their work.

    The shards' leftover batches go into the checkpoint's ``leftover``, in shard order, each
    shard's record saying how many are its own. Raises :class:`Interrupted` once saved when the
    run was asked to stop.
    """
    files = corpus.files
    everything = Position(len(files), 0, 1, 0)
    save_checkpoint(
        checkpointing.folder,
        Checkpoint(
            config=config.to_dict(),
            files=[str(path.resolve()) for path in files],
            corpus=corpus_identity(files, everything),
            entries=list(vocab.entries),
            position=everything,
            stats=asdict(replace(result[2], vocabulary=vocabulary_stats(vocab))),
            encode_stats={},
            sums=result[0],
            counts=result[1],
            remaining=np.zeros(0, dtype=np.int64),
            leftover=[batch for entry in shard_states for batch in entry.leftover],
            shards=[_shard_record(entry) for entry in shard_states],
            shard_quota=np.stack([entry.quota for entry in shard_states]),
            shard_remaining=np.stack([entry.state.remaining for entry in shard_states]),
        ),
    )
    checkpointing.written = True
    if checkpointing.stop is not None and checkpointing.stop.is_set():
        raise stopped(checkpointing)


def _shard_record(entry: ShardState) -> dict[str, Any]:
    return {
        "start": asdict(entry.shard.start),
        "stop": asdict(entry.shard.stop),
        "position": asdict(entry.state.position),
        "done": entry.done,
        "may_stop_early": entry.may_stop_early,
        "stats": asdict(entry.state.stats),
        "encode_stats": asdict(entry.encode_stats),
        "leftover": len(entry.leftover),
    }


def restore_shards(saved: Checkpoint, pass_: ParallelPass) -> list[ShardState]:
    """The shard states of a parallel checkpoint; its sums go back into the first encoder's."""
    first = pass_.accumulators[0]
    first.sums.copy_(torch_from(saved.sums, first.sums))
    first.counts.copy_(torch_from(saved.counts, first.counts))
    pass_.encoder_stats[0].tokens = saved.stats["tokens"]
    pass_.encoder_stats[0].padded_tokens = saved.stats["padded_tokens"]
    pass_.encoders[0].float32_recomputes = saved.stats["batches_recomputed_float32"]
    pass_.seconds_before = saved.stats["seconds"]
    return load_shards(saved)


def load_shards(saved: Checkpoint) -> list[ShardState]:
    """The shard states saved in a parallel checkpoint."""
    states, leftover = [], iter(saved.leftover)
    for record, quota, remaining in zip(
        saved.shards, saved.shard_quota, saved.shard_remaining, strict=True
    ):
        shard = Shard(Position(**record["start"]), Position(**record["stop"]))
        state = PassState(Position(**record["position"]), remaining, RunStats(**record["stats"]))
        encode = EncodeStats(**record["encode_stats"])
        batches = list(itertools.islice(leftover, record.get("leftover", 0)))
        states.append(
            ShardState(
                shard, state, encode, quota, record["done"], record["may_stop_early"], batches
            )
        )
    return states
