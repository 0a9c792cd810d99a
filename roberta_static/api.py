"""The distillation pass: corpus → sentences → occurrences → encoder batches → mean vectors.

``distill`` resolves paths and names and loads the model; ``distill_from_model`` does the work on
objects, so tests and notebooks can pass a model they built.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from functools import partial
from typing import Any

import numpy as np

from .config import DistillConfig
from .debug import tells_all
from .engine.base import Job
from .engine.checkpoint import Checkpoint, check_resume
from .engine.choice import check_engine, engine_for, with_workers
from .engine.collector import heap_frozen
from .engine.state import PassState
from .engine.stats import RunStats
from .engine.step import add_batch
from .errors import ConfigError, CorpusError, Interrupted, VocabError
from .formats.holding import holdable_entries
from .model.encoder import Encoder, free_memory
from .model.loading import load_pretrained, model_fingerprint
from .model.pooling import Accumulator
from .model.teacher import teacher_pooling
from .notices import as_flag, language_hint, texts_again, warn_about_run
from .progress import Plan, Progress, ProgressCallback, size_text
from .stopping import Checkpointing
from .text.corpus import Corpus, TextCorpus, check_readable
from .text.languages import check_language, check_pipeline
from .text.segment import load_segmenter
from .text.vocab import MatchedSentence, Vocabulary, vocabulary_stats
from .vectors.fill import mapped_fill, require_fittable
from .vectors.postprocess import postprocess
from .vectors.static import StaticVectors
from .vectors.targets import SentenceTargets
from .version import __version__

logger = logging.getLogger(__name__)


@tells_all
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
        progress: Called with a :class:`~roberta_static.progress.Plan` once before the pass
            (the accumulator's size and device), then now and then with a
            :class:`~roberta_static.progress.Progress` (the stage, ``"count"`` or
            ``"distill"``, and the bytes, sentences and tokens done), as the command line's
            progress bar is drawn; it should return quickly.
        checkpointing: Where and how often to save the state (see :class:`Checkpointing`).
        resume_from: A saved state to continue from.
        texts: Instead of ``corpus``: texts in memory, any iterable of strings, read as a stream
            (see :class:`~roberta_static.text.corpus.TextCorpus`; no checkpoints).

    Returns:
        The vectors of every entry found (and of the unseen ones with ``fill_unseen``). What
        the command line's summary says (entries not found, input skipped or repaired) comes
        as :class:`~roberta_static.errors.RobertaStaticWarning` warnings, and the whole lists
        are in ``vectors.meta["stats"]``. The ``roberta_static`` logger says what the run is
        doing; ``ROBERTA_STATIC_DEBUG=1`` prints it, and gives an error its full traceback,
        a worker process's included (see :mod:`roberta_static.debug`).

    Example:
        >>> config = DistillConfig(model="./tiny-model", layers="1-2")  # doctest: +SKIP
        >>> vecs = distill("examples/wiki.txt", "examples/vocab.txt", config)  # doctest: +SKIP
        >>> vecs = distill(texts=df["text"], vocab=["cat", "dog"], config=config)  # doctest: +SKIP

    """
    if config is None:
        raise TypeError("distill() needs config=DistillConfig(model=...)")
    source, vocabulary = resolve_inputs(corpus, vocab, config, texts)
    if resume_from is not None and isinstance(source, Corpus):
        entries = vocabulary.entries if vocabulary is not None else None
        check_resume(resume_from, config, source.files, entries)
    check_engine(config)  # before the model loads
    load = partial(load_pretrained, config)
    vectors = _distill(load, source, vocabulary, config, progress, checkpointing, resume_from)
    warn_about_run(vectors.meta, texts_again(source))
    return vectors


def resolve_inputs(
    corpus: str | os.PathLike | Iterable[str | os.PathLike] | None,
    vocab: str | os.PathLike | Iterable[str] | Vocabulary | None,
    config: DistillConfig,
    texts: Iterable[str] | None = None,
) -> tuple[Corpus | TextCorpus, Vocabulary | None]:
    """Open the corpus and read the vocabulary: bad input fails before the model loads."""
    if (corpus is None) == (texts is None):
        raise ConfigError("pass either corpus (file paths) or texts (strings in memory)")
    if config.spacy_model is None:
        check_language(config.lang)
    else:
        check_pipeline(config.spacy_model)
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
        check_readable(source.files)
    return source, _vocabulary(vocab, config)


def _vocabulary(
    vocab: str | os.PathLike | Iterable[str] | Vocabulary | None, config: DistillConfig
) -> Vocabulary | None:
    """The vocabulary a file or a list of entries names (None: count one in the corpus)."""
    if isinstance(vocab, (str, os.PathLike)):
        vocab = Vocabulary.from_file(vocab, config.case)
    elif vocab is not None and not isinstance(vocab, Vocabulary):
        vocab = Vocabulary.from_entries(vocab, config.case)
        if not vocab.entries:
            raise VocabError("vocab: the list holds no entry")
    if vocab is not None and config.fill_unseen == "mapped":
        require_fittable(len(vocab), "and the vocabulary holds only")
    return vocab


@tells_all
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

    def loaded() -> tuple[Any, Any]:
        return model, tokenizer

    vectors = _distill(loaded, corpus, vocab, config, progress, checkpointing, resume_from)
    warn_about_run(vectors.meta, texts_again(corpus))
    return vectors


def _check_resumable(
    corpus: Corpus | TextCorpus,
    checkpointing: Checkpointing | None,
    resume_from: Checkpoint | None,
) -> None:
    """Refuse checkpoints and resume for texts in memory, before anything loads or starts."""
    if isinstance(corpus, TextCorpus) and (checkpointing or resume_from):
        raise ConfigError(
            "checkpoints and resume need corpus files; texts in memory cannot be resumed"
        )


def _distill(
    load: Callable[[], tuple[Any, Any]],
    corpus: Corpus | TextCorpus,
    vocab: Vocabulary | None,
    config: DistillConfig,
    progress: ProgressCallback | None,
    checkpointing: Checkpointing | None,
    resume_from: Checkpoint | None,
) -> StaticVectors:
    """The pass, with the model and tokenizer ``load`` gives.

    The engine starts first: its worker processes (seconds of imports) start while the model
    loads, or while :class:`Encoder` moves it to the device. The objects alive meanwhile are
    kept out of Python's full garbage collections (see :mod:`.engine.collector`).
    """
    _check_resumable(corpus, checkpointing, resume_from)
    config = with_workers(config)
    engine = engine_for(config, corpus)
    logger.info(
        "%s over %s (workers %s, devices %s)",
        type(engine).__name__,
        corpus,
        config.workers,
        ", ".join(config.devices),
    )
    with heap_frozen() as freeze_loaded, engine.start(checkpointing):
        logger.info("loading the model %s", config.model)
        model, tokenizer = load()
        started = time.perf_counter()
        encoder = Encoder(model, tokenizer, config)
        if config.pca is not None and config.pca > encoder.output_dim(config.combine):
            raise ConfigError(
                f"{config.pca} exceeds the vectors' width {encoder.output_dim(config.combine)}",
                field="pca",
            )
        logger.info("loading the spaCy pipeline %s", config.spacy_model or f"blank:{config.lang}")
        nlp = load_segmenter(config.lang, config.spacy_model)
        freeze_loaded()  # the model and pipeline too, which the pass keeps
        report = progress or (lambda _: None)
        if resume_from is not None:
            vocab = Vocabulary(resume_from.entries, config.case, **resume_from.vocabulary)
        elif vocab is None:
            vocab = _counted_vocabulary(corpus, config, report, checkpointing)
        job = Job(model, tokenizer, encoder, nlp, corpus, vocab, config, _targets(config, encoder))
        report(_plan(len(vocab), job.dim, encoder))
        logger.info("the pass: %d entries on %s", len(vocab), encoder.device)
        resumed = resume_from.state if resume_from is not None else None
        state = engine.run(job, resumed, checkpointing, report)
    return _vectors(job, state, started)


def _counted_vocabulary(
    corpus: Corpus | TextCorpus,
    config: DistillConfig,
    report: ProgressCallback,
    checkpointing: Checkpointing | None,
) -> Vocabulary:
    """The corpus words seen ``min_count`` times, at most ``max_vocab`` of them.

    Of words that an export would spell alike, the more frequent is kept. The words are counted
    with a spaCy pipeline of their own, dropped once counted: a pipeline keeps every string it
    has seen, and the pass's would hold every word of the corpus to its end.
    """
    logger.info("counting the vocabulary in %s", corpus)
    counting = _reporting(corpus, "count", report, checkpointing)
    nlp = load_segmenter(config.lang, config.spacy_model)
    vocab = Vocabulary.from_corpus(nlp, counting, config.case, config.min_count, config.max_vocab)
    if not vocab.entries:
        raise VocabError(f"no corpus word occurs {config.min_count} or more times (min_count)")
    kept, left_out = holdable_entries(vocab.entries, config.case)
    return Vocabulary(kept, config.case, left_out=left_out)


def _vectors(job: Job, state: PassState, started: float) -> StaticVectors:
    """The mean vectors of a finished pass, filled and post-processed as ``job`` asks."""
    vocab, config, corpus = job.vocab, job.config, job.corpus
    means, counts = state.means(len(vocab))
    keep = counts > 0
    stats = _run_stats(job, state, keep.copy())
    if config.fill_unseen != "none" and not keep.all():
        _fill(job.encoder, vocab, config, means, keep, stats)
    if not keep.any():
        hint = language_hint(config.lang, config.spacy_model, texts_again(corpus), as_flag)
        raise VocabError(
            f"none of the {len(vocab)} vocabulary entries occurs in the corpus "
            f"({hint or 'try --fill-unseen decontextualized or check --case'})"
        )
    stats.occurrences_used = int(counts.sum())
    stats.seconds = round(stats.seconds + time.perf_counter() - started, 3)
    meta = _metadata(config, job.encoder, job.model, corpus, stats)
    rows = np.flatnonzero(keep)
    vectors = StaticVectors([vocab.entries[i] for i in rows], means[rows], counts[rows], meta)
    if not config.postprocessing.is_identity:
        vectors = postprocess(vectors, config.postprocessing)
    if state.targets is not None:  # their entries, renamed to the rows of the vectors
        renamed = np.full(len(vocab), -1, dtype=np.int64)
        renamed[rows] = np.arange(len(rows))
        vectors.targets = state.targets.reindexed(renamed)
    return vectors


def _targets(config: DistillConfig, encoder: Encoder) -> SentenceTargets | None:
    """The empty sample of sentence targets a pass with ``sentence_targets`` fills."""
    if not config.sentence_targets:
        return None
    pooling = teacher_pooling(config.model).to_dict()
    return SentenceTargets(config.sentence_targets, encoder.hidden_size, pooling)


def _run_stats(job: Job, state: PassState, found: np.ndarray) -> RunStats:
    """Every counter of the pass, and which entries it found (``found``: those it encoded)."""
    stats = state.run_stats()
    if stats.sentences == 0:
        raise CorpusError(f"{job.corpus}: corpus holds no text")
    vocab = job.vocab
    seen = state.occurring(len(vocab))
    stats.entries = len(vocab)
    stats.vocabulary = vocabulary_stats(vocab)
    stats.paths_skipped = {str(path): why for path, why in job.corpus.skipped.items()}
    stats.entries_found = int(found.sum())
    stats.entries_not_found = [vocab.entries[i] for i in np.flatnonzero(~seen)]
    stats.entries_not_encoded = [vocab.entries[i] for i in np.flatnonzero(seen & ~found)]
    return stats


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


def _decontextualized(
    encoder: Encoder, vocab: Vocabulary, entry_ids: np.ndarray, config: DistillConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Each entry alone through the encoder, with the run's layers and pooling.

    Returns the vectors and whether each entry could be embedded: one longer than the model's
    input limit cannot, and its row is zero.
    """
    accumulator = Accumulator(len(entry_ids), encoder.output_dim(config.combine), encoder.device)
    sentences = [
        MatchedSentence(vocab.entries[i], [(0, len(vocab.entries[i]), row)])
        for row, i in enumerate(entry_ids)
    ]
    for batch in encoder.batches(encoder.subwords.encode(sentences)):
        add_batch(encoder, batch, accumulator, config, RunStats())
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
    stats.fill["not_filled"] = [vocab.entries[i] for i in unseen[~embedded]]


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
            "dtype": encoder.precision.name,
            "dtype_reason": encoder.precision.reason,
            **model_fingerprint(config.model, model),
        },
        "corpus": corpus.describe(),
        "stats": asdict(stats),
        "postprocessing": [],
    }
