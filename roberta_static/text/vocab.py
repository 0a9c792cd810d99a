"""The vocabulary: entries read from a file or counted in the corpus, and matched in sentences.

The case policy lives here: with ``case="lower"`` entries are stored lower-cased and matched on
spaCy's ``LOWER`` attribute; with ``case="keep"`` they are matched on ``ORTH``. Entries are put in
Unicode NFC, as the corpus text is (:func:`~roberta_static.text.corpus.normalize_text`).
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import Case
from ..errors import VocabError
from .corpus import normalize_text

if TYPE_CHECKING:  # spaCy loads with the matcher, not to read a vocabulary file
    from spacy.language import Language
    from spacy.tokens import Doc


@dataclass
class Vocabulary:
    """Ordered, unique vocabulary entries (words or space-separated phrases).

    Attributes:
        entries: The entries, normalised (NFC, case policy applied, inner whitespace collapsed).
        case: The case policy they were normalised with.
        duplicates: Lines dropped because they repeated an earlier entry.
        blank_lines: Blank lines skipped.
        left_out: Corpus words left out because an export would spell them as a more frequent
            entry (see :func:`~roberta_static.formats.exports.holdable_entries`).

    """

    entries: list[str]
    case: Case = "lower"
    duplicates: int = 0
    blank_lines: int = 0
    left_out: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.entries)

    @classmethod
    def from_entries(cls, lines: Iterable[str], case: Case = "lower") -> Vocabulary:
        """Build from raw entries, skipping blanks and repeats.

        Example:
            >>> Vocabulary.from_entries(["Paris", "paris", "", "New  York"]).entries
            ['paris', 'new york']

        """
        vocab = cls(entries=[], case=case)
        seen: set[str] = set()
        for line in lines:
            entry = normalize_entry(line, case)
            if not entry:
                vocab.blank_lines += 1
            elif entry in seen:
                vocab.duplicates += 1
            else:
                seen.add(entry)
                vocab.entries.append(entry)
        return vocab

    @classmethod
    def from_file(cls, path: str | os.PathLike, case: Case = "lower") -> Vocabulary:
        """Read one entry per line from a UTF-8 file (a leading byte order mark is dropped).

        A file holding NUL bytes is binary, as for corpus files, and an empty result is an error.
        """
        path = Path(path)
        try:
            data = path.read_bytes()
            if b"\0" in data:
                line = data.count(b"\n", 0, data.index(b"\0")) + 1
                raise VocabError(
                    f"{path}:{line}: NUL byte: a binary file, not a vocabulary "
                    "(expected UTF-8 text, one entry per line)"
                )
            text = data.decode("utf-8-sig")
        except FileNotFoundError:
            raise VocabError(f"{path}: vocabulary file not found") from None
        except (OSError, UnicodeDecodeError) as error:
            raise VocabError(f"{path}: cannot read vocabulary ({error})") from None
        lines = text.splitlines()
        for number, line in enumerate(lines, start=1):
            if "\t" in line.strip():
                raise VocabError(
                    f"{path}:{number}: tab inside an entry; expected one entry per line"
                )
        vocab = cls.from_entries(lines, case)
        if not vocab.entries:
            raise VocabError(
                f"{path}: vocabulary is empty ({len(lines)} lines, none with an entry)"
            )
        return vocab

    @classmethod
    def from_corpus(
        cls, nlp: Language, texts: Iterable[str], case: Case, min_count: int, max_vocab: int | None
    ) -> Vocabulary:
        """Count the corpus words (spaCy tokens, no punctuation or space); keep the frequent ones.

        Entries are ordered by descending count, ties alphabetically.
        """
        spellings: Counter[str] = Counter()
        for doc in nlp.tokenizer.pipe(texts, batch_size=256):
            spellings.update(t.text for t in doc if not (t.is_punct or t.is_space))
        counts: Counter[str] = Counter()
        for spelling, count in spellings.items():
            counts[_fold(spelling, case)] += count
        ranked = sorted(
            (w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w)
        )
        return cls(entries=ranked[:max_vocab], case=case)


def normalize_entry(line: str, case: Case) -> str:
    """Strip, collapse inner whitespace, put in NFC and apply the case policy."""
    return _fold(" ".join(line.split()), case)


def _fold(text: str, case: Case) -> str:
    """NFC first, then the case policy: the order in which corpus tokens get their ``LOWER``."""
    text = normalize_text(text)
    return text.lower() if case == "lower" else text


@dataclass
class MatchedSentence:
    """One sentence and the vocabulary occurrences in it.

    Attributes:
        text: The sentence text.
        spans: ``(start_char, end_char, entry_id)`` per occurrence, relative to ``text``, in order.

    """

    text: str
    spans: list[tuple[int, int, int]] = field(default_factory=list)


def vocabulary_stats(vocab: Vocabulary) -> dict[str, Any]:
    """What reading the vocabulary skipped, as run statistics (and checkpoints) record it.

    ``left_out`` is there only when a word was.
    """
    stats: dict[str, Any] = {"duplicates": vocab.duplicates, "blank_lines": vocab.blank_lines}
    return {**stats, "left_out": vocab.left_out} if vocab.left_out else stats


@dataclass(frozen=True)
class VocabPatterns:
    """The token sequences that are occurrences of each entry, as hashes of one token attribute.

    An entry's sequences are the entry as the pipeline's tokenizer splits it alone, and, for an
    entry without a space that it splits, the entry as one token: tokenization depends on context
    (``"U.S."`` alone is ``["U.S", "."]``, mid-sentence one token). Hashes are spaCy's string
    hashes, the same in every process, so patterns built once serve every worker, none of which
    tokenizes the vocabulary again.

    Attributes:
        attr: The attribute matched: ``"LOWER"`` or ``"ORTH"``.
        tokens: The sequences' hashes, one after another.
        ends: Where each sequence ends in ``tokens``.
        entries: The entry of each sequence.

    """

    attr: str
    tokens: np.ndarray
    ends: np.ndarray
    entries: np.ndarray

    @classmethod
    def of(cls, nlp: Language, vocab: Vocabulary) -> VocabPatterns:
        """The patterns of ``vocab``'s entries under ``nlp``'s tokenizer and the case policy."""
        from spacy.attrs import IDS

        attr = "LOWER" if vocab.case == "lower" else "ORTH"
        attr_id = IDS[attr]
        tokens: list[int] = []
        ends: list[int] = []
        entries: list[int] = []
        for entry_id, (entry, alone) in enumerate(
            zip(vocab.entries, nlp.tokenizer.pipe(vocab.entries), strict=True)
        ):
            sequences = [alone.to_array(attr_id).tolist()]
            if " " not in entry and len(alone) > 1:
                sequences.append([getattr(nlp.vocab[entry], attr.lower())])
            for sequence in sequences:
                tokens += sequence
                ends.append(len(tokens))
                entries.append(entry_id)
        return cls(
            attr,
            np.array(tokens, dtype=np.uint64),
            np.array(ends, dtype=np.int64),
            np.array(entries, dtype=np.int64),
        )


class VocabMatcher:
    """Find every occurrence of the vocabulary's entries in spaCy Docs, sentence by sentence.

    The occurrences :class:`spacy.matcher.PhraseMatcher` finds for :class:`VocabPatterns` (every
    sequence at every position, overlaps included), from plain dictionaries of hashes: a
    ``PhraseMatcher`` holds a trie of hash maps and the vocabulary's strings, slow to build and
    large in every process that reads.
    """

    def __init__(self, patterns: VocabPatterns) -> None:
        from spacy.attrs import IDS, IDX, LENGTH, SENT_START

        self._columns = [IDX, LENGTH, SENT_START, IDS[patterns.attr]]
        # One-token sequences, the most, in one dictionary; the others whole, with the longest
        # that starts with each token, so a position is tried only as far as one could reach.
        self._words: dict[int, int] = {}
        self._sequences: dict[tuple[int, ...], list[int]] = {}
        self._longest_from: dict[int, int] = {}
        tokens = patterns.tokens.tolist()
        bounds = pairwise([0, *patterns.ends.tolist()])
        for (start, end), entry in zip(bounds, patterns.entries.tolist(), strict=True):
            sequence = tuple(tokens[start:end])
            if len(sequence) == 1 and self._words.setdefault(sequence[0], entry) == entry:
                continue
            entries = self._sequences.setdefault(sequence, [])
            if entry not in entries:
                entries.append(entry)
                first = self._longest_from.get(sequence[0], 0)
                self._longest_from[sequence[0]] = max(first, len(sequence))

    @classmethod
    def of(cls, nlp: Language, vocab: Vocabulary) -> VocabMatcher:
        """The matcher of ``vocab``'s entries under ``nlp``'s tokenizer."""
        return cls(VocabPatterns.of(nlp, vocab))

    def matches(self, keys: list[int]) -> list[tuple[int, int, int]]:
        """``(start, end, entry_id)`` of each occurrence in a Doc's token hashes, in no order."""
        found = [
            (start, start + 1, entry)
            for start, entry in enumerate(map(self._words.get, keys))
            if entry is not None
        ]
        sequences, length = self._sequences, len(keys)
        for start, longest in enumerate(map(self._longest_from.get, keys)):
            if longest:
                for end in range(start + 1, min(start + longest, length) + 1):
                    found += [
                        (start, end, entry) for entry in sequences.get(tuple(keys[start:end]), ())
                    ]
        return found

    def __call__(self, doc: Doc, text: str | None = None) -> Iterator[MatchedSentence]:
        """Yield every sentence of ``doc`` with the occurrences inside it.

        ``text``: the Doc's text, where the caller has it (``Doc.text`` joins it token by token).
        """
        if not len(doc):
            return
        # Token attributes as one array: Span and Token objects cost more than the matching.
        columns = doc.to_array(self._columns)
        token_starts = columns[:, 0].tolist()
        token_ends = (columns[:, 0] + columns[:, 1]).tolist()
        columns[0, 2] = 1
        if "sents" in doc.user_hooks:  # a component that defines sentences its own way
            first_tokens = [sentence.start for sentence in doc.sents]
        else:
            first_tokens = np.flatnonzero(columns[:, 2] == 1).tolist()
        end_tokens = first_tokens[1:] + [len(doc)]
        found: list[list[tuple[int, int, int]]] = [[] for _ in first_tokens]
        for start, end, entry in self.matches(columns[:, 3].tolist()):
            sentence = bisect_right(first_tokens, start) - 1
            if end <= end_tokens[sentence]:
                offset = token_starts[first_tokens[sentence]]
                span = (token_starts[start] - offset, token_ends[end - 1] - offset)
                found[sentence].append((*span, entry))
        text = doc.text if text is None else text
        for first, end, spans in zip(first_tokens, end_tokens, found, strict=True):
            yield MatchedSentence(text[token_starts[first] : token_ends[end - 1]], sorted(spans))
