"""Split text units into sentences and words with spaCy (default: blank pipeline + sentencizer)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import numpy as np
import spacy
from spacy.attrs import IS_PUNCT, IS_SPACE, LOWER, NORM, ORTH, SENT_START
from spacy.language import Language
from spacy.pipeline import Sentencizer
from spacy.strings import get_string_id
from spacy.tokens import Doc

from ..errors import ConfigError

Context = TypeVar("Context")

LEXEME_ATTRS = (LOWER, NORM, IS_PUNCT, IS_SPACE)
"""What this package reads of a word: matching (``LOWER``), sentencizer and vocabulary counts."""
SENTENCIZER = "roberta_static_sentencizer"
TOKENIZER_CACHE_CHUNKS = 1_000_000
"""Distinct chunks the tokenizer remembers (benchmarks/experiments/tokenizer_cache.py: its memory).

spaCy 3.7 has no bound."""


def load_segmenter(lang: str = "en", spacy_model: str | None = None) -> Language:
    """A spaCy pipeline that sets sentence boundaries.

    Args:
        lang: Language code of the blank pipeline (``en``, ``de``, ...), used when ``spacy_model``
            is not given.
        spacy_model: Name or path of an installed pipeline; a sentencizer is added when it has no
            component that sets sentence boundaries.

    The blank pipeline's words carry only the lexeme attributes this package reads
    (:data:`LEXEME_ATTRS`); a pipeline loaded by name keeps all of them, since its components may
    read any.

    Example:
        >>> nlp = load_segmenter("en")
        >>> [s.text for s in nlp("Hi there. Bye.").sents]
        ['Hi there.', 'Bye.']

    """
    if spacy_model is None:
        try:
            nlp = spacy.blank(lang)
        except (ImportError, KeyError) as error:
            raise ConfigError(f"spaCy has no language {lang!r} ({error})", field="lang") from None
        # spaCy computes some twenty attributes, in Python, for every word it sees the first
        # time (see the profile in docs/benchmarks/throughput.md).
        getters = nlp.vocab.lex_attr_getters
        nlp.vocab.lex_attr_getters = {a: getters[a] for a in LEXEME_ATTRS if a in getters}
    else:
        try:
            nlp = spacy.load(spacy_model, exclude=["ner", "lemmatizer", "textcat"])
        except OSError as error:
            raise ConfigError(
                f"cannot load {spacy_model!r}: {error}", field="spacy_model"
            ) from None
    if not set(nlp.pipe_factories.values()) & {"parser", "senter", "sentencizer"}:
        nlp.add_pipe(SENTENCIZER, name="sentencizer")
    if hasattr(nlp.tokenizer, "max_cache_size"):
        # spaCy 3.8 caches only the first 10,000 distinct space-separated chunks; past them every
        # chunk of a real corpus goes through the affix regexes again.
        nlp.tokenizer.max_cache_size = TOKENIZER_CACHE_CHUNKS
    return nlp


class BatchSentencizer(Sentencizer):
    """spaCy's rule-based sentencizer, applied to a batch of Docs' token arrays at once.

    The same boundaries as :class:`spacy.pipeline.Sentencizer`: a sentence starts at a token that
    is neither punctuation nor one of ``punct_chars`` after such a sentence-final character.
    spaCy's version walks Token objects (see the profile in docs/benchmarks/throughput.md).
    """

    def __call__(self, doc: Doc) -> Doc:
        """Set ``Token.is_sent_start`` on every token of ``doc``."""
        (doc,) = self.pipe([doc])
        return doc

    def pipe(self, stream: Iterable[Doc], batch_size: int = 128) -> Iterator[Doc]:
        """Set sentence starts on each Doc of ``stream``, ``batch_size`` Docs at a time."""
        for docs in spacy.util.minibatch(stream, size=batch_size):
            self._set_starts(docs)
            yield from docs

    def _set_starts(self, docs: list[Doc]) -> None:
        columns = [doc.to_array([ORTH, IS_PUNCT, SENT_START]) for doc in docs]
        lengths = np.fromiter(map(len, columns), np.int64, len(columns))
        if not lengths.sum():
            return
        orths, punct, before = np.concatenate(columns).T
        final = self._is_final(orths)
        words = np.flatnonzero(~final & (punct == 0))
        doc_starts = np.cumsum(lengths) - lengths
        # Sentence-final characters since the word before (or since the Doc's start).
        doc_of_word = np.searchsorted(doc_starts, words, side="right") - 1
        first_in_doc = np.diff(doc_of_word, prepend=-1) != 0
        since = np.where(first_in_doc, doc_starts[doc_of_word], np.roll(words, 1) + 1)
        finals = np.concatenate([[0], np.cumsum(final)])
        starts = np.full(len(orths), -1, dtype=np.int64)
        starts[doc_starts[lengths > 0]] = 1
        starts[words[finals[words] > finals[since]]] = 1
        if not self.overwrite:
            before = before.astype(np.int64)
            starts = np.where(before == 0, starts, before)
        for doc, start, length in zip(docs, doc_starts.tolist(), lengths.tolist(), strict=True):
            if length:
                doc.from_array([SENT_START], starts[start : start + length, None].astype(np.uint64))

    def _is_final(self, orths: np.ndarray) -> np.ndarray:
        chars = frozenset(self.punct_chars)
        if getattr(self, "_final_orths", (None,))[0] != chars:  # punct_chars may be reassigned
            self._final_orths = (
                chars,
                np.sort(np.array([get_string_id(c) for c in chars], np.uint64)),
            )
        final_orths = self._final_orths[1]
        if not len(final_orths):
            return np.zeros(len(orths), dtype=bool)
        found = np.searchsorted(final_orths, orths).clip(max=len(final_orths) - 1)
        return final_orths[found] == orths


@Language.factory(SENTENCIZER, default_config={"punct_chars": None, "overwrite": False})
def make_batch_sentencizer(
    nlp: Language, name: str, punct_chars: list[str] | None, overwrite: bool
) -> BatchSentencizer:
    """Build a :class:`BatchSentencizer` (what ``nlp.add_pipe`` calls)."""
    return BatchSentencizer(name, punct_chars=punct_chars, overwrite=overwrite)


STRINGS_BEFORE_RELOAD = 200_000
"""Strings a :class:`Segmenter` learns before its pipeline is loaded again."""


class Segmenter:
    """A pipeline that sets sentence boundaries, loaded again once it has learned many strings.

    spaCy keeps every string and word it has seen (its ``StringStore`` and ``Vocab``): over a
    corpus whose vocabulary keeps growing (numbers, names, misspellings, the long tail of a
    dump) a pipeline's memory grows with the text it reads. spaCy's own remedy,
    ``nlp.memory_zone()``, turns the tokenizer's cache off inside a zone, which makes
    tokenizing several times slower; a pipeline loaded again only has to fill its cache again.

    Args:
        lang: Language of the blank pipeline, as :func:`load_segmenter` takes it.
        spacy_model: Installed pipeline to load instead, as :func:`load_segmenter` takes it.
        nlp: The pipeline to start with (loaded from ``lang`` and ``spacy_model``), if loaded.

    """

    def __init__(self, lang: str, spacy_model: str | None, nlp: Language | None = None) -> None:
        self.lang, self.spacy_model = lang, spacy_model
        self.nlp = nlp if nlp is not None else load_segmenter(lang, spacy_model)

    def pipe(self, texts: Iterable[Any], **options: Any) -> Iterator[Any]:
        """``nlp.pipe``, on a pipeline within the limit (loaded again first, if past it)."""
        if len(self.nlp.vocab.strings) > STRINGS_BEFORE_RELOAD:
            self.nlp = load_segmenter(self.lang, self.spacy_model)
        return self.nlp.pipe(texts, **options)


def segment(
    nlp: Language | Segmenter,
    units: Iterable[tuple[str, Context]],
    batch_size: int = 256,
    batch_chars: int = 1_000_000,
) -> Iterator[tuple[Doc, Context]]:
    """Run the pipeline over ``(text, context)`` pairs, streaming; Docs have sentence boundaries.

    A batch holds at most ``batch_size`` texts and, past its first text, ``batch_chars``
    characters: ``nlp.pipe`` keeps a whole batch of Docs alive, so long texts get small batches.
    """
    batch: list[tuple[str, Context]] = []
    chars = 0
    for text, context in units:
        if batch and (len(batch) == batch_size or chars + len(text) > batch_chars):
            yield from nlp.pipe(batch, as_tuples=True, batch_size=len(batch))
            batch, chars = [], 0
        batch.append((text, context))
        chars += len(text)
    if batch:
        yield from nlp.pipe(batch, as_tuples=True, batch_size=len(batch))
