"""Entries a format cannot hold apart: two it would spell alike, or one it cannot spell at all.

Each format keys an entry by its own spelling of it: a vectors folder and a ``.kv`` by the entry
itself, word2vec files by the entry with ``_`` for each space (``new york`` is ``new_york``), the
model2vec and sentence-transformers folders by the token their tokenizer gives (lower-cased there
when the vectors were). Two entries under one key would leave one of them out, so each family
module's ``clashes(words, fmt, case)`` lists such entries, and they are refused before anything is
written (:func:`~roberta_static.formats.exports.check_entries`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Clash:
    """Entries one format cannot hold apart, and why.

    Attributes:
        entries: Two or more entries spelled alike, or one the format cannot spell.
        why: What happens to them, said after the entries (``would both be 'new_york'``).

    """

    entries: tuple[str, ...]
    why: str

    def __str__(self) -> str:
        return f"{joined(self.entries)} {self.why}"


def spelled_alike(words: Sequence[str], keys: Sequence[str]) -> list[Clash]:
    """The entries of ``words`` that share a key (``keys[i]`` spells ``words[i]``), in row order.

    An entry given twice is a clash of its own, whatever the keys.

    Example:
        >>> words = ["new york", "new_york", "cat"]
        >>> [str(c) for c in spelled_alike(words, ["new_york", "new_york", "cat"])]
        ["'new york' and 'new_york' would both be 'new_york'"]

    """
    counted = Counter(keys)
    if len(counted) == len(keys):
        return []
    repeated = {key for key, count in counted.items() if count > 1}
    groups: dict[str, list[str]] = {}
    for word, key in zip(words, keys, strict=True):
        if key in repeated:
            groups.setdefault(key, []).append(word)
    clashes = []
    for key, group in groups.items():
        distinct = list(dict.fromkeys(group))
        if len(distinct) < len(group):
            clashes.append(Clash((group[0],), f"is there {len(group)} times"))
        elif len(group) > 1:
            both = "both" if len(group) == 2 else "all"
            clashes.append(Clash(tuple(group), f"would {both} be {key!r}"))
    return clashes


def not_text(words: Iterable[str]) -> list[Clash]:
    """Entries that are no Unicode text (a lone surrogate), which no file can hold as UTF-8."""
    words = list(words)
    try:
        "".join(words).encode("utf-8")
        return []
    except UnicodeEncodeError:
        return [Clash((w,), "is not Unicode text (a lone surrogate)") for w in words if _bad(w)]


def holding(words: Sequence[str], pattern: re.Pattern[str], what: str) -> list[Clash]:
    """Entries in which ``pattern`` finds a character the format cannot hold (``what`` it is)."""
    if not pattern.search("".join(words)):
        return []
    return [
        Clash((word,), f"holds {found.group()!r} ({what})")
        for word in words
        if (found := pattern.search(word))
    ]


def joined(entries: Sequence[str]) -> str:
    """``'a', 'b' and 'c'``: entries quoted so that inner whitespace shows.

    Entries that look alike (``café`` in NFC and NFD) are shown as escapes, to tell them apart.
    """
    if len({unicodedata.normalize("NFC", entry) for entry in entries}) < len(entries):
        return listed([ascii(entry) for entry in entries])
    return listed([repr(entry) for entry in entries])


def listed(names: Sequence[str]) -> str:
    """``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def described(clashes: Sequence[object], shown: int = 3) -> str:
    """Clashes for a one-line message: the first ``shown``, then how many more."""
    listed = "; ".join(str(clash) for clash in clashes[:shown])
    return listed + (f"; and {len(clashes) - shown:,} more" if len(clashes) > shown else "")


def _bad(word: str) -> bool:
    try:
        word.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True
