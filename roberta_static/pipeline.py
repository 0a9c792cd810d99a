"""The distillation pass: corpus → sentences → occurrences → encoder batches → mean vectors.

``distill`` resolves paths and names and loads the model; ``distill_from_model`` does the work on
objects, so tests and notebooks can pass a model they built.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from . import __version__
from .accumulate import Accumulator, output_dim
from .batching import Batch, EncodeStats
from .checkpoint import (
    CHECKPOINT_DIR,
    Checkpoint,
    Checkpointing,
    corpus_identity,
    save_checkpoint,
)
from .config import DistillConfig
from .corpus import START, Corpus, Position, TextCorpus
from .encoder import Encoder, free_memory, load_pretrained, model_fingerprint
from .errors import ConfigError, CorpusError, Interrupted, VocabError
from .fill import mapped_fill
from .postprocess import postprocess
from .prefetch import prefetch
from .segment import load_segmenter, segment
from .vectors import StaticVectors
from .vocab import MatchedSentence, VocabMatcher, Vocabulary


@dataclass
class Progress:
    """A progress report: ``stage`` is ``"count"`` (building the vocabulary) or ``"distill"``."""

    stage: str
    bytes_read: int
    total_bytes: int
    sentences: int = 0
    tokens: int = 0


@dataclass
class Plan:
    """Reported once before the pass: the accumulator's size and where it lives."""

    entries: int
    dim: int
    accumulator_bytes: int
    device: str
    free_bytes: int | None

    def __str__(self) -> str:
        free = f" ({size_text(self.free_bytes)} free)" if self.free_bytes is not None else ""
        return (
            f"{self.entries:,} entries x {self.dim:,} floats = "
            f"{size_text(self.accumulator_bytes)} on {self.device}{free}"
        )


ProgressCallback = Callable[[Progress | Plan], None]


@dataclass
class RunStats:
    """What one run read, skipped and computed; written to ``meta.json``.

    ``entries_not_found`` lists the vocabulary entries that never occur in the corpus;
    ``entries_not_encoded`` those that occur, but never in a form the encoder could read (each
    occurrence longer than the model's input window, or without subwords). Neither has a
    contextual vector; ``fill_unseen`` may still give them one.
    """

    text_units: int = 0
    sentences: int = 0
    sentences_without_entries: int = 0
    sentences_encoded: int = 0
    windows: int = 0
    split_sentences: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    occurrences_used: int = 0
    occurrences_without_subwords: int = 0
    occurrences_too_long: int = 0
    batches_recomputed_float32: int = 0
    bad_bytes: int = 0
    stopped_early: bool = False
    binary_files_skipped: list[str] = field(default_factory=list)
    entries: int = 0
    entries_found: int = 0
    entries_filled: int = 0
    entries_not_found: list[str] = field(default_factory=list)
    entries_not_encoded: list[str] = field(default_factory=list)
    fill: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    vocabulary: dict[str, int] = field(default_factory=dict)


def distill(
    corpus: str | os.PathLike | Iterable[str | os.PathLike] | None = None,
    vocab: str | os.PathLike | Iterable[str] | Vocabulary | None = None,
    config: DistillConfig | None = None,
    progress: ProgressCallback | None = None,
    checkpointing: Checkpointing | None = None,
    resume_from: Checkpoint | None = None,
    *,
    texts: Iterable[str] | None = None,
) -> StaticVectors:
    """Distill static vectors of ``vocab`` from ``config.model`` over corpus files or texts.

    Args:
        corpus: Corpus file or folder paths (text, .gz/.bz2/.xz, JSONL); a string is a path.
        vocab: A vocabulary file, a list of entries, a :class:`Vocabulary`, or ``None`` to count
            one in the corpus.
        config: Every option of the run.
        progress: Called now and then with a :class:`Progress`.
        checkpointing: Where and how often to save the state (see :class:`Checkpointing`).
        resume_from: A saved state to continue from.
        texts: Instead of ``corpus``: texts in memory, any iterable of strings, read as a stream
            (see :class:`~roberta_static.corpus.TextCorpus`; no checkpoints).

    Returns:
        The vectors of every entry found (and of the unseen ones with ``fill_unseen``).

    Example:
        >>> config = DistillConfig(model="./tiny-model", layers="1-2")  # doctest: +SKIP
        >>> vecs = distill("examples/wiki.txt", "examples/vocab.txt", config)  # doctest: +SKIP
        >>> vecs = distill(texts=df["text"], vocab=["cat", "dog"], config=config)  # doctest: +SKIP

    """
    if config is None:
        raise TypeError("distill() needs config=DistillConfig(model=...)")
    source, vocabulary = resolve_inputs(corpus, vocab, config, texts)
    model, tokenizer = load_pretrained(config)
    return distill_from_model(
        model, tokenizer, source, vocabulary, config, progress, checkpointing, resume_from
    )


def resolve_inputs(
    corpus: str | os.PathLike | Iterable[str | os.PathLike] | None,
    vocab: str | os.PathLike | Iterable[str] | Vocabulary | None,
    config: DistillConfig,
    texts: Iterable[str] | None = None,
) -> tuple[Corpus | TextCorpus, Vocabulary | None]:
    """Open the corpus and read the vocabulary: bad input fails before the model loads."""
    if (corpus is None) == (texts is None):
        raise ConfigError("pass either corpus (file paths) or texts (strings in memory)")
    if texts is not None:
        source: Corpus | TextCorpus = TextCorpus(texts)
        if vocab is None and not source.reiterable:
            raise ConfigError(
                "texts: building the vocabulary reads the texts twice, and a generator can be "
                "read once; pass vocab=[...] or a list of texts"
            )
    else:
        paths = [corpus] if isinstance(corpus, (str, os.PathLike)) else list(corpus)
        source = Corpus(paths, config.text_field)
    if isinstance(vocab, (str, os.PathLike)):
        vocab = Vocabulary.from_file(vocab, config.case)
    elif vocab is not None and not isinstance(vocab, Vocabulary):
        vocab = Vocabulary.from_entries(vocab, config.case)
        if not vocab.entries:
            raise VocabError("vocab: the list holds no entry")
    return source, vocab


def distill_from_model(
    model: Any,
    tokenizer: Any,
    corpus: Corpus | TextCorpus,
    vocab: Vocabulary | None,
    config: DistillConfig,
    progress: ProgressCallback | None = None,
    checkpointing: Checkpointing | None = None,
    resume_from: Checkpoint | None = None,
) -> StaticVectors:
    """Like :func:`distill`, on a loaded model, fast tokenizer and :class:`Corpus`.

    With ``checkpointing``, the state is saved now and then (and when its ``stop`` is set); with
    ``resume_from``, the run continues from a saved state and gives the same vectors as a run that
    was never stopped.
    """
    if isinstance(corpus, TextCorpus) and (checkpointing or resume_from):
        raise ConfigError(
            "checkpoints and resume need corpus files; texts in memory cannot be resumed"
        )
    started = time.perf_counter()
    encoder = Encoder(model, tokenizer, config)
    if config.pca is not None and config.pca > _dim(encoder, config):
        raise ConfigError(
            f"{config.pca} exceeds the vectors' width {_dim(encoder, config)}", field="pca"
        )
    nlp = load_segmenter(config.lang, config.spacy_model)
    report = progress or (lambda _: None)
    if resume_from is not None:
        vocab = Vocabulary(resume_from.entries, config.case)
    elif vocab is None:
        vocab = Vocabulary.from_corpus(
            nlp,
            _reporting(corpus, "count", report, checkpointing),
            config.case,
            config.min_count,
            config.max_vocab,
        )
        if not vocab.entries:
            raise VocabError(f"no corpus word occurs {config.min_count} or more times (min_count)")
    report(_plan(len(vocab), _dim(encoder, config), encoder))
    accumulator = Accumulator(len(vocab), _dim(encoder, config), encoder.device)
    if resume_from is not None:
        state = _PassState.restore(resume_from, encoder, accumulator)
    else:
        state = _PassState.fresh(len(vocab), config)
        state.stats.vocabulary = {"duplicates": vocab.duplicates, "blank_lines": vocab.blank_lines}
    stats = state.stats
    pass_ = _Pass(encoder, nlp, VocabMatcher(nlp, vocab), corpus, accumulator, config, report)
    pass_.run(state, checkpointing, vocab, started)
    means, counts = accumulator.means()
    if stats.sentences == 0:
        raise CorpusError(f"{corpus}: corpus holds no text")
    keep = counts > 0
    seen = state.remaining < _contexts_allowed(config)
    stats.entries_found = int(keep.sum())
    stats.entries_not_found = [vocab.entries[i] for i in np.flatnonzero(~seen)]
    stats.entries_not_encoded = [vocab.entries[i] for i in np.flatnonzero(seen & ~keep)]
    if config.fill_unseen != "none" and not keep.all():
        _fill(encoder, vocab, config, means, keep, stats)
    if not keep.any():
        raise VocabError(
            f"none of the {len(vocab)} vocabulary entries occurs in the corpus "
            "(try --fill-unseen decontextualized or check --case)"
        )
    stats.occurrences_used = int(counts.sum())
    stats.seconds = round(stats.seconds + time.perf_counter() - started, 3)
    meta = _metadata(config, encoder, model, corpus, stats)
    rows = np.flatnonzero(keep)
    vectors = StaticVectors([vocab.entries[i] for i in rows], means[rows], counts[rows], meta)
    if config.postprocessing.is_identity:
        return vectors
    return postprocess(vectors, config.postprocessing)


@dataclass
class _PassState:
    """Where the pass is: input position, contexts left per entry, counters."""

    position: Position
    remaining: np.ndarray
    stats: RunStats
    seconds_before: float = 0.0
    leftover: list[Batch] = field(default_factory=list)

    @classmethod
    def fresh(cls, n_entries: int, config: DistillConfig) -> _PassState:
        remaining = np.full(n_entries, _contexts_allowed(config), dtype=np.int64)
        return cls(START, remaining, RunStats(entries=n_entries))

    @classmethod
    def restore(cls, saved: Checkpoint, encoder: Encoder, accumulator: Accumulator) -> _PassState:
        accumulator.sums.copy_(torch_from(saved.sums, accumulator.sums))
        accumulator.counts.copy_(torch_from(saved.counts, accumulator.counts))
        encoder.subwords.stats = EncodeStats(**saved.encode_stats)
        stats = RunStats(**saved.stats)
        encoder.float32_recomputes = stats.batches_recomputed_float32
        return cls(saved.position, saved.remaining.copy(), stats, stats.seconds, saved.leftover)


@dataclass
class _Chunk:
    """Encoder batches of a chunk of sentences, and the state right after that chunk."""

    batches: list[Batch]
    state: _PassState
    encode_stats: EncodeStats


class _Pass:
    """The pass over the corpus: a producer thread prepares chunks, the encoder consumes them."""

    def __init__(
        self,
        encoder: Encoder,
        nlp: Any,
        matcher: VocabMatcher,
        corpus: Corpus | TextCorpus,
        accumulator: Accumulator,
        config: DistillConfig,
        report: ProgressCallback,
    ) -> None:
        self.encoder, self.nlp, self.matcher, self.corpus = encoder, nlp, matcher, corpus
        self.accumulator, self.config, self.report = accumulator, config, report

    def run(
        self,
        state: _PassState,
        checkpointing: Checkpointing | None,
        vocab: Vocabulary,
        started: float,
    ) -> None:
        """Encode and accumulate every chunk; with ``checkpointing``, save between batches."""
        stats = state.stats
        saver = _Saver(self, checkpointing, vocab, state.seconds_before, started)
        chunks: Iterable[_Chunk] = prefetch(self._chunks(state))
        if state.leftover:
            resumed = _Chunk(
                state.leftover, replace(state, stats=replace(stats)), self.encoder.subwords.stats
            )
            chunks = itertools.chain([resumed], chunks)
        for chunk in chunks:
            for done, batch in enumerate(chunk.batches, start=1):
                _add_batch(self.encoder, batch, self.accumulator, self.config, stats)
                self.report(
                    Progress(
                        "distill",
                        self.corpus.bytes_read,
                        self.corpus.total_bytes,
                        stats.sentences,
                        stats.tokens,
                    )
                )
                saver.after_batch(chunk, chunk.batches[done:], stats)
        self.report(
            Progress(
                "distill",
                self.corpus.bytes_read,
                self.corpus.total_bytes,
                stats.sentences,
                stats.tokens,
            )
        )
        subword_stats = self.encoder.subwords.stats
        stats.sentences_encoded = subword_stats.sentences_encoded
        stats.windows = subword_stats.windows
        stats.split_sentences = subword_stats.split_sentences
        stats.occurrences_without_subwords = subword_stats.occurrences_without_subwords
        stats.occurrences_too_long = subword_stats.occurrences_too_long
        stats.batches_recomputed_float32 = self.encoder.float32_recomputes

    def _chunks(self, state: _PassState) -> Iterator[_Chunk]:
        """Encoder inputs of the sentences that still hold an entry, a chunk at a time."""
        stats, remaining = state.stats, state.remaining
        pending: list[MatchedSentence] = []
        position = state.position
        marks = _Marks(self.corpus, stats)
        for doc, mark in segment(self.nlp, marks.units(state.position)):
            position = mark.position
            marks.count_up_to(mark)
            for sentence in self.matcher(doc):
                stats.sentences += 1
                kept = _take_contexts(sentence.spans, remaining)
                if kept:
                    pending.append(MatchedSentence(sentence.text, kept))
                else:
                    stats.sentences_without_entries += 1
            if self.config.max_contexts and not remaining.any():
                stats.stopped_early = True
                break
            if len(pending) >= self.config.chunk_sentences:
                yield self._chunk(pending, position, remaining, stats)
                pending = []
        else:
            marks.count_all()
        if pending:
            yield self._chunk(pending, position, remaining, stats)

    def _chunk(
        self,
        pending: list[MatchedSentence],
        position: Position,
        remaining: np.ndarray,
        stats: RunStats,
    ) -> _Chunk:
        batches = self.encoder.batches(self.encoder.subwords.encode(pending))
        snapshot = _PassState(position, remaining.copy(), replace(stats))
        return _Chunk(batches, snapshot, replace(self.encoder.subwords.stats))


class _Saver:
    """Checkpoints between batches: every ``every_seconds``, and when asked to stop."""

    def __init__(
        self,
        pass_: _Pass,
        checkpointing: Checkpointing | None,
        vocab: Vocabulary,
        seconds_before: float,
        started: float,
    ) -> None:
        self.pass_, self.checkpointing, self.vocab = pass_, checkpointing, vocab
        self.seconds_before, self.started = seconds_before, started
        self.last_saved = time.monotonic()

    def after_batch(self, chunk: _Chunk, leftover: list[Batch], stats: RunStats) -> None:
        """Save when due or stopping; on a stop, raise :class:`Interrupted` once saved."""
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
            raise Interrupted(
                f"stopped; checkpoint in {checkpointing.folder / CHECKPOINT_DIR}; "
                f"resume with: roberta-static distill --resume {checkpointing.folder}"
            )

    def _save(
        self, checkpointing: Checkpointing, chunk: _Chunk, leftover: list[Batch], stats: RunStats
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
                stats=asdict(saved_stats),
                encode_stats=asdict(chunk.encode_stats),
                sums=pass_.accumulator.sums.cpu().numpy(),
                counts=pass_.accumulator.counts.cpu().numpy(),
                remaining=chunk.state.remaining,
                leftover=leftover,
            ),
        )
        checkpointing.written = True


def torch_from(array: np.ndarray, like: Any) -> Any:
    """A numpy array as a tensor on the device of ``like``."""
    import torch

    return torch.from_numpy(array).to(like.device)


def _contexts_allowed(config: DistillConfig) -> int:
    """Occurrences each entry may contribute: ``max_contexts``, or all of them when 0."""
    return config.max_contexts or int(np.iinfo(np.int64).max)


def _take_contexts(
    spans: list[tuple[int, int, int]], remaining: np.ndarray
) -> list[tuple[int, int, int]]:
    """Keep the occurrences whose entry has not reached ``max_contexts``, counting them down."""
    kept = []
    for span in spans:
        if remaining[span[2]] > 0:
            remaining[span[2]] -= 1
            kept.append(span)
    return kept


def _add_batch(
    encoder: Encoder, batch: Batch, accumulator: Accumulator, config: DistillConfig, stats: RunStats
) -> None:
    """Run the encoder on one batch and accumulate its occurrences."""
    accumulator.add(encoder.hidden_states(batch), batch, config.pool, config.combine)
    stats.tokens += batch.real_tokens
    stats.padded_tokens += int(batch.input_ids.size)


def _plan(n_entries: int, dim: int, encoder: Encoder) -> Plan:
    """The accumulator's size; refused with advice when the device cannot hold it."""
    needed = Accumulator.bytes_needed(n_entries, dim)
    free = free_memory(encoder.device)
    if free is not None and needed > free:
        raise ConfigError(
            f"the accumulator needs {size_text(needed)} ({n_entries:,} entries x {dim:,} floats) "
            f"but {encoder.device} has {size_text(free)} free; use fewer layers, or combine them "
            "by mean or sum instead of concat, or a smaller vocabulary (--max-vocab or a shorter "
            "--vocab file)"
        )
    return Plan(n_entries, dim, needed, str(encoder.device), free)


def size_text(n_bytes: int) -> str:
    """``512 B``, ``3.2 kB``, ``41.0 MB``, ``2.5 GB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:,.1f} {unit}"
    return f"{n_bytes} B"


def _decontextualized(
    encoder: Encoder, vocab: Vocabulary, entry_ids: np.ndarray, config: DistillConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Each entry alone through the encoder, with the run's layers and pooling.

    Returns the vectors and whether each entry could be embedded: one longer than the model's
    input limit cannot, and its row is zero.
    """
    accumulator = Accumulator(len(entry_ids), _dim(encoder, config), encoder.device)
    sentences = [
        MatchedSentence(vocab.entries[i], [(0, len(vocab.entries[i]), row)])
        for row, i in enumerate(entry_ids)
    ]
    for batch in encoder.batches(encoder.subwords.encode(sentences)):
        _add_batch(encoder, batch, accumulator, config, RunStats())
    vectors, counts = accumulator.means()
    return vectors, counts > 0


def _fill(
    encoder: Encoder,
    vocab: Vocabulary,
    config: DistillConfig,
    means: np.ndarray,
    keep: np.ndarray,
    stats: RunStats,
) -> None:
    """Give the unseen entries (``~keep``) a vector in place, by the ``fill_unseen`` method."""
    if config.fill_unseen == "decontextualized":
        unseen = np.flatnonzero(~keep)
        filled, embedded = _decontextualized(encoder, vocab, unseen, config)
        stats.fill = {"method": "decontextualized"}
    else:
        alone, embedded_all = _decontextualized(encoder, vocab, np.arange(len(vocab)), config)
        fitted = np.flatnonzero(keep & embedded_all)
        unseen = np.flatnonzero(~keep)
        filled, stats.fill = mapped_fill(alone[fitted], means[fitted], alone[unseen])
        embedded = embedded_all[unseen]
    means[unseen[embedded]] = filled[embedded]
    keep[unseen[embedded]] = True
    stats.entries_filled = int(embedded.sum())


def decontextualized(
    model: Any, tokenizer: Any, vocab: Vocabulary, config: DistillConfig
) -> StaticVectors:
    """Every entry embedded alone, without a corpus (the baseline model2vec-style tools use).

    Counts are 0; the layers, pooling and post-processing of ``config`` apply. Entries longer
    than the model's input limit are left out.
    """
    encoder = Encoder(model, tokenizer, config)
    vectors, embedded = _decontextualized(encoder, vocab, np.arange(len(vocab)), config)
    meta = {"config": config.to_dict(), "method": "decontextualized"}
    words = [entry for entry, ok in zip(vocab.entries, embedded, strict=True) if ok]
    result = StaticVectors(words, vectors[embedded], np.zeros(len(words), dtype=np.int64), meta)
    if config.postprocessing.is_identity:
        return result
    return postprocess(result, config.postprocessing)


def _dim(encoder: Encoder, config: DistillConfig) -> int:
    return output_dim(encoder.hidden_size, len(encoder.layers), config.combine)


@dataclass(frozen=True)
class _Mark:
    """A unit's resume position, and the corpus counters up to and including that unit."""

    position: Position
    text_units: int
    bad_bytes: int
    binary_files: int


class _Marks:
    """Corpus counters attributed to units, so a checkpoint never counts read-ahead units.

    ``nlp.pipe`` reads units ahead of the Docs it yields; the counters at a Doc are those carried
    by its unit, added to what the run had counted before it resumed.
    """

    def __init__(self, corpus: Corpus | TextCorpus, stats: RunStats) -> None:
        self.corpus, self.stats = corpus, stats
        self.before = (stats.text_units, stats.bad_bytes, list(stats.binary_files_skipped))

    def units(self, start: Position) -> Iterator[tuple[str, _Mark]]:
        for number, (text, position) in enumerate(self.corpus.units(start), start=1):
            counts = (number, self.corpus.bad_bytes, len(self.corpus.binary_files))
            yield text, _Mark(position, *counts)

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


def _reporting(
    corpus: Corpus | TextCorpus,
    stage: str,
    report: ProgressCallback,
    checkpointing: Checkpointing | None = None,
) -> Iterable[str]:
    """The corpus's texts, reporting progress; a stop ends it (there is no state worth saving)."""
    stop = checkpointing.stop if checkpointing is not None else None
    for number, text in enumerate(corpus, start=1):
        if number % 1000 == 0:
            report(Progress(stage, corpus.bytes_read, corpus.total_bytes))
        if stop is not None and stop.is_set():
            raise Interrupted(
                "stopped while counting the vocabulary, before any vector was computed; "
                "nothing was saved"
            )
        yield text
    report(Progress(stage, corpus.bytes_read, corpus.total_bytes))


def _metadata(
    config: DistillConfig,
    encoder: Encoder,
    model: Any,
    corpus: Corpus | TextCorpus,
    stats: RunStats,
) -> dict[str, Any]:
    return {
        "package": {"name": "roberta-static", "version": __version__},
        "config": config.to_dict(),
        "model": {
            "name": config.model,
            "type": getattr(model.config, "model_type", None),
            "num_layers": encoder.num_layers,
            "hidden_size": encoder.hidden_size,
            "layers_used": list(encoder.layers),
            "max_length": encoder.max_length,
            "batch_tokens": encoder.batch_tokens,
            "device": str(encoder.device),
            "dtype": str(encoder.dtype).removeprefix("torch."),
            **model_fingerprint(config.model, model),
        },
        "corpus": corpus.describe(),
        "stats": asdict(stats),
        "postprocessing": [],
    }
