"""Which entries each format can hold apart, over all the formats a write asks for.

Every format keys entries by its own spelling of them, and a family module's
``clashes(words, fmt, case)`` lists the entries it cannot hold apart
(:mod:`~roberta_static.formats.clashes`): :func:`check_entries` refuses them before anything is
written, and :func:`holdable_entries` keeps the first of each, for a vocabulary counted in a corpus.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from ..errors import VectorsError, VocabError
from .clashes import Clash, described, listed, not_text
from .registry import FORMATS, family


def find_clashes(
    words: Sequence[str], case: str, formats: Iterable[str]
) -> list[tuple[Clash, list[str]]]:
    """The entries some of ``formats`` cannot hold apart, each with the formats concerned.

    Args:
        words: The entries, in row order.
        case: The case policy of the vectors (``lower`` or ``keep``).
        formats: Formats of :data:`FORMATS` (``native`` too).

    Example:
        >>> found = find_clashes(["new york", "new_york"], "lower", ["kv", "word2vec"])
        >>> [(str(clash), formats) for clash, formats in found]
        [("'new york' and 'new_york' would both be 'new_york'", ['word2vec'])]

    """
    found: dict[Clash, list[str]] = {}
    formats = list(dict.fromkeys(formats))
    unreadable = {clash.entries[0] for clash in not_text(words)}
    text = [word for word in words if word not in unreadable] if unreadable else words
    for name in formats:
        for clash in family(name).clashes(text, name, case):
            found.setdefault(clash, []).append(name)
    for word in unreadable:  # no file holds it; the families need text
        found[Clash((word,), "is not Unicode text (a lone surrogate)")] = formats
    return list(found.items())


def check_entries(
    words: Sequence[str],
    case: str,
    formats: Iterable[str],
    source: str | os.PathLike,
    vocabulary: bool = False,
) -> None:
    """Refuse entries that a format of ``formats`` cannot hold apart, before anything is written.

    Args:
        words: The entries.
        case: The case policy of the vectors.
        formats: The formats to be written.
        source: Where the entries come from, named in the error.
        vocabulary: ``words`` are a vocabulary about to be distilled: the error says to fix it.

    Raises:
        VectorsError: Such entries (a :class:`VocabError` with ``vocabulary``), the first few
            named with why, in one line.

    """
    formats = list(formats)
    found = find_clashes(words, case, formats) if formats else []
    if not found:
        return
    named = list(dict.fromkeys(name for _, names in found for name in names))
    exports = [name for name in named if name != "native"]
    what = f"the {listed(exports)} export{'s' if len(exports) > 1 else ''}" if exports else ""
    if "native" in named:
        what = f"a vectors folder{' and ' if what else ''}{what}"
    clashes = [
        f"{clash} (in {', '.join(names)})" if len(named) > 1 else clash for clash, names in found
    ]
    fix = "keep one of each in the vocabulary, or spell them apart" if vocabulary else ""
    if exports and "native" not in named:
        leave = f"leave {listed(exports)} out of --formats"
        fix = f"{fix}, or {leave}" if fix else f"{leave} (the vectors folder keeps every entry)"
    error = VocabError if vocabulary else VectorsError
    raise error(
        f"{source}: {what} cannot hold every entry apart: {described(clashes)}"
        + (f"; {fix}" if fix else "")
    )


def holdable_entries(entries: Sequence[str], case: str) -> tuple[list[str], list[str]]:
    """``entries`` that every format holds apart, and those left out (each in ``entries``' order).

    Of entries that a format would spell alike, the first is kept: a vocabulary counted in a
    corpus lists the more frequent first. One that no spelling lets a format hold is left out.
    """
    rivals: dict[str, set[str]] = {}
    unholdable: set[str] = set()
    for clash, _ in find_clashes(entries, case, FORMATS):
        if len(clash.entries) == 1:
            unholdable.add(clash.entries[0])
        for entry in clash.entries:
            rivals.setdefault(entry, set()).update(clash.entries)
    kept: list[str] = []
    left_out: list[str] = []
    held: set[str] = set()
    for entry in entries:
        if entry in unholdable or rivals.get(entry, set()) & held:
            left_out.append(entry)
        else:
            kept.append(entry)
            held.add(entry)
    return kept, left_out
