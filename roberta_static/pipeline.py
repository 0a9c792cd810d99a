"""The distillation pass: corpus → sentences → occurrences → encoder batches → mean vectors.

``distill`` resolves paths and names and loads the model; ``distill_from_model`` does the work on
objects, so tests and notebooks can pass a model they built.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from . import __version__
from .accumulate import Accumulator, output_dim
from .batching import EncoderInput, make_batches
from .config import DistillConfig
from .corpus import Corpus
from .encoder import Encoder, load_pretrained, model_fingerprint
from .errors import ConfigError, CorpusError, VocabError
from .postprocess import postprocess
from .prefetch import prefetch
from .segment import load_segmenter, segment
from .vectors import StaticVectors
from .vocab import MatchedSentence, VocabMatcher, Vocabulary

CHUNK_SENTENCES = 2048  # sentences encoded, length-sorted and batched together


@dataclass
class Progress:
    """A progress report: ``stage`` is ``"count"`` (building the vocabulary) or ``"distill"``."""

    stage: str
    bytes_read: int
    total_bytes: int
    sentences: int = 0
    tokens: int = 0


ProgressCallback = Callable[[Progress], None]


@dataclass
class RunStats:
    """What one run read, skipped and computed; written to ``meta.json``."""

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
    bad_bytes: int = 0
    stopped_early: bool = False
    entries: int = 0
    entries_found: int = 0
    entries_filled: int = 0
    seconds: float = 0.0
    vocabulary: dict[str, int] = field(default_factory=dict)


def distill(
    corpus: str | os.PathLike | Iterable[str | os.PathLike],
    vocab: str | os.PathLike | Vocabulary | None,
    config: DistillConfig,
    progress: ProgressCallback | None = None,
) -> StaticVectors:
    """Distill static vectors of ``vocab`` from ``config.model`` over the corpus files.

    Args:
        corpus: Corpus file or folder paths (text, .gz/.bz2/.xz, JSONL).
        vocab: A vocabulary file, a :class:`Vocabulary`, or ``None`` to count one in the corpus.
        config: Every option of the run.
        progress: Called now and then with a :class:`Progress`.

    Returns:
        The vectors of every entry found (and of the unseen ones with ``fill_unseen``).

    Example:
        >>> config = DistillConfig(model="./tiny-model", layers="1-2")  # doctest: +SKIP
        >>> vecs = distill("examples/wiki.txt", "examples/vocab.txt", config)  # doctest: +SKIP

    """
    texts, vocabulary = resolve_inputs(corpus, vocab, config)
    model, tokenizer = load_pretrained(config)
    return distill_from_model(model, tokenizer, texts, vocabulary, config, progress)


def resolve_inputs(
    corpus: str | os.PathLike | Iterable[str | os.PathLike],
    vocab: str | os.PathLike | Vocabulary | None,
    config: DistillConfig,
) -> tuple[Corpus, Vocabulary | None]:
    """Open the corpus and read the vocabulary file: bad input fails before the model loads."""
    paths = [corpus] if isinstance(corpus, (str, os.PathLike)) else list(corpus)
    texts = Corpus(paths, config.text_field)
    if vocab is not None and not isinstance(vocab, Vocabulary):
        vocab = Vocabulary.from_file(vocab, config.case)
    return texts, vocab


def distill_from_model(
    model: Any,
    tokenizer: Any,
    corpus: Corpus,
    vocab: Vocabulary | None,
    config: DistillConfig,
    progress: ProgressCallback | None = None,
) -> StaticVectors:
    """Like :func:`distill`, on a loaded model, fast tokenizer and :class:`Corpus`."""
    started = time.perf_counter()
    encoder = Encoder(model, tokenizer, config)
    if config.pca is not None and config.pca > _dim(encoder, config):
        raise ConfigError(f"pca: {config.pca} exceeds the vectors' width {_dim(encoder, config)}")
    nlp = load_segmenter(config.lang, config.spacy_model)
    report = progress or (lambda _: None)
    if vocab is None:
        vocab = Vocabulary.from_corpus(
            nlp,
            _reporting(corpus, "count", report),
            config.case,
            config.min_count,
            config.max_vocab,
        )
        if not vocab.entries:
            raise VocabError(f"no corpus word occurs {config.min_count} or more times (min_count)")
    stats = RunStats(entries=len(vocab))
    stats.vocabulary = {"duplicates": vocab.duplicates, "blank_lines": vocab.blank_lines}
    accumulator = Accumulator(len(vocab), _dim(encoder, config), encoder.device)
    _run_pass(encoder, nlp, VocabMatcher(nlp, vocab), corpus, accumulator, config, stats, report)
    means, counts = accumulator.means()
    stats.bad_bytes = corpus.bad_bytes
    if stats.sentences == 0:
        where = corpus.files[0] if len(corpus.files) == 1 else f"{len(corpus.files)} corpus files"
        raise CorpusError(f"{where}: corpus holds no text")
    keep = counts > 0
    stats.entries_found = int(keep.sum())
    if config.fill_unseen == "decontextualized" and not keep.all():
        unseen = np.flatnonzero(~keep)
        means[unseen] = _decontextualized(encoder, vocab, unseen, config)
        stats.entries_filled = len(unseen)
        keep[:] = True
    if not keep.any():
        raise VocabError(
            f"none of the {len(vocab)} vocabulary entries occurs in the corpus "
            "(try --fill-unseen decontextualized or check --case)"
        )
    stats.occurrences_used = int(counts.sum())
    stats.seconds = round(time.perf_counter() - started, 3)
    meta = _metadata(config, encoder, model, corpus, stats)
    rows = np.flatnonzero(keep)
    vectors = StaticVectors([vocab.entries[i] for i in rows], means[rows], counts[rows], meta)
    if config.postprocessing.is_identity:
        return vectors
    return postprocess(vectors, config.postprocessing)


def _run_pass(
    encoder: Encoder,
    nlp: Any,
    matcher: VocabMatcher,
    corpus: Corpus,
    accumulator: Accumulator,
    config: DistillConfig,
    stats: RunStats,
    report: ProgressCallback,
) -> None:
    chunks = _encoded_chunks(encoder, nlp, matcher, corpus, len(accumulator.counts), config, stats)
    for inputs in prefetch(chunks):
        _add_inputs(encoder, inputs, accumulator, config, stats, report, corpus)
    report(
        Progress("distill", corpus.bytes_read, corpus.total_bytes, stats.sentences, stats.tokens)
    )
    subword_stats = encoder.subwords.stats
    stats.sentences_encoded = subword_stats.sentences_encoded
    stats.windows = subword_stats.windows
    stats.split_sentences = subword_stats.split_sentences
    stats.occurrences_without_subwords = subword_stats.occurrences_without_subwords
    stats.occurrences_too_long = subword_stats.occurrences_too_long


def _encoded_chunks(
    encoder: Encoder,
    nlp: Any,
    matcher: VocabMatcher,
    corpus: Corpus,
    n_entries: int,
    config: DistillConfig,
    stats: RunStats,
) -> Iterator[list[EncoderInput]]:
    """Encoder inputs of the sentences that still hold an entry, a chunk of sentences at a time."""
    unlimited = np.iinfo(np.int64).max
    remaining = np.full(n_entries, config.max_contexts or unlimited, dtype=np.int64)
    pending: list[MatchedSentence] = []
    for doc in segment(nlp, _counting(corpus, stats)):
        for sentence in matcher(doc):
            stats.sentences += 1
            kept = _take_contexts(sentence.spans, remaining)
            if kept:
                pending.append(MatchedSentence(sentence.text, kept))
            else:
                stats.sentences_without_entries += 1
        if len(pending) >= CHUNK_SENTENCES:
            yield encoder.subwords.encode(pending)
            pending = []
        if config.max_contexts and not remaining.any():
            stats.stopped_early = True
            break
    if pending:
        yield encoder.subwords.encode(pending)


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


def _add_inputs(
    encoder: Encoder,
    inputs: Sequence[EncoderInput],
    accumulator: Accumulator,
    config: DistillConfig,
    stats: RunStats,
    report: ProgressCallback | None = None,
    corpus: Corpus | None = None,
) -> None:
    """Batch the inputs by the token budget, run the encoder, and accumulate."""
    for batch in make_batches(inputs, config.batch_tokens, encoder.subwords.pad_id):
        accumulator.add(encoder.hidden_states(batch), batch, config.pool, config.combine)
        stats.tokens += batch.real_tokens
        stats.padded_tokens += int(batch.input_ids.size)
        if report is not None and corpus is not None:
            progress = Progress(
                "distill", corpus.bytes_read, corpus.total_bytes, stats.sentences, stats.tokens
            )
            report(progress)


def _decontextualized(
    encoder: Encoder, vocab: Vocabulary, entry_ids: np.ndarray, config: DistillConfig
) -> np.ndarray:
    """Each entry alone through the encoder, with the run's layers and pooling."""
    accumulator = Accumulator(len(vocab), _dim(encoder, config), encoder.device)
    sentences = [
        MatchedSentence(vocab.entries[i], [(0, len(vocab.entries[i]), int(i))]) for i in entry_ids
    ]
    _add_inputs(encoder, encoder.subwords.encode(sentences), accumulator, config, RunStats())
    return accumulator.means()[0][entry_ids]


def decontextualized(
    model: Any, tokenizer: Any, vocab: Vocabulary, config: DistillConfig
) -> StaticVectors:
    """Every entry embedded alone, without a corpus (the baseline model2vec-style tools use).

    Counts are 0; the layers, pooling and post-processing of ``config`` apply.
    """
    encoder = Encoder(model, tokenizer, config)
    vectors = _decontextualized(encoder, vocab, np.arange(len(vocab)), config)
    meta = {"config": config.to_dict(), "method": "decontextualized"}
    result = StaticVectors(list(vocab.entries), vectors, np.zeros(len(vocab), dtype=np.int64), meta)
    if config.postprocessing.is_identity:
        return result
    return postprocess(result, config.postprocessing)


def _dim(encoder: Encoder, config: DistillConfig) -> int:
    return output_dim(encoder.hidden_size, len(encoder.layers), config.combine)


def _counting(corpus: Corpus, stats: RunStats) -> Iterable[str]:
    for text in corpus:
        stats.text_units += 1
        yield text


def _reporting(corpus: Corpus, stage: str, report: ProgressCallback) -> Iterable[str]:
    for number, text in enumerate(corpus, start=1):
        if number % 1000 == 0:
            report(Progress(stage, corpus.bytes_read, corpus.total_bytes))
        yield text
    report(Progress(stage, corpus.bytes_read, corpus.total_bytes))


def _metadata(
    config: DistillConfig, encoder: Encoder, model: Any, corpus: Corpus, stats: RunStats
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
            "device": str(encoder.device),
            "dtype": str(encoder.dtype).removeprefix("torch."),
            **model_fingerprint(config.model, model),
        },
        "corpus": [{"path": str(f), "bytes": f.stat().st_size} for f in corpus.files],
        "stats": asdict(stats),
        "postprocessing": [],
    }
