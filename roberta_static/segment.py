"""Split text units into sentences and words with spaCy (default: blank pipeline + sentencizer)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

import spacy
from spacy.language import Language
from spacy.tokens import Doc

from .errors import ConfigError

Context = TypeVar("Context")


def load_segmenter(lang: str = "en", spacy_model: str | None = None) -> Language:
    """A spaCy pipeline that sets sentence boundaries.

    Args:
        lang: Language code of the blank pipeline (``en``, ``de``, ...), used when ``spacy_model``
            is not given.
        spacy_model: Name or path of an installed pipeline; a sentencizer is added when it has no
            component that sets sentence boundaries.

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
    else:
        try:
            nlp = spacy.load(spacy_model, exclude=["ner", "lemmatizer", "textcat"])
        except OSError as error:
            raise ConfigError(
                f"cannot load {spacy_model!r}: {error}", field="spacy_model"
            ) from None
    if not set(nlp.pipe_factories.values()) & {"parser", "senter", "sentencizer"}:
        nlp.add_pipe("sentencizer")
    return nlp


def segment(
    nlp: Language,
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
