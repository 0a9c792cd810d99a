"""Split text units into sentences and words with spaCy (default: blank pipeline + sentencizer)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import spacy
from spacy.language import Language
from spacy.tokens import Doc

from .errors import ConfigError

# spaCy refuses texts over nlp.max_length (1,000,000 characters); longer units are cut at a space
# near this many characters, which keeps memory per unit bounded too.
MAX_UNIT_CHARS = 100_000


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
            raise ConfigError(f"lang: spaCy has no language {lang!r} ({error})") from None
    else:
        try:
            nlp = spacy.load(spacy_model, exclude=["ner", "lemmatizer", "textcat"])
        except OSError as error:
            raise ConfigError(f"spacy_model: cannot load {spacy_model!r}: {error}") from None
    if not set(nlp.pipe_factories.values()) & {"parser", "senter", "sentencizer"}:
        nlp.add_pipe("sentencizer")
    return nlp


def split_long(text: str, limit: int = MAX_UNIT_CHARS) -> Iterator[str]:
    """Cut ``text`` into pieces of at most ``limit`` characters, at a space where there is one."""
    while len(text) > limit:
        cut = text.rfind(" ", limit // 2, limit)
        cut = cut + 1 if cut > 0 else limit
        yield text[:cut]
        text = text[cut:]
    yield text


def segment(nlp: Language, texts: Iterable[str], batch_size: int = 256) -> Iterator[Doc]:
    """Run the pipeline over text units, streaming; each yielded Doc has sentence boundaries."""
    pieces = (piece for text in texts for piece in split_long(text))
    yield from nlp.pipe(pieces, batch_size=batch_size)
