"""From matched sentences to padded encoder batches.

Sentences are encoded as raw text with the model's fast (Rust) tokenizer, and each occurrence's
subwords are the tokens whose character offsets overlap it. Byte-level BPE tokenizers (RoBERTa,
GPT-2) get a leading space before each sentence, so a word has the same subwords at sentence start
and mid-sentence. (The space is added to the text rather than with the pre-tokenizer's
``add_prefix_space``, whose offsets for the first word are shifted by one.)
Sentences longer than the model's limit become overlapping windows; each occurrence is read from the
window where it sits most centrally.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
from tokenizers import Tokenizer

from ..errors import ConfigError
from ..text.vocab import MatchedSentence
from .batches import EncoderInput, EncodeStats, TargetSentence

MIN_WINDOW = 2
"""Fewest text tokens an input holds beside its special tokens (windows overlap by half)."""


class SubwordEncoder:
    """Encode sentences into :class:`EncoderInput` with a private copy of a fast tokenizer.

    Args:
        backend: The ``tokenizers.Tokenizer`` behind a Hugging Face fast tokenizer (copied, never
            changed).
        max_length: Longest encoder input, special tokens included.
        pad_id: Id used for padding.

    """

    def __init__(self, backend: Tokenizer, max_length: int, pad_id: int) -> None:
        self._tokenizer = _plain_copy(backend)
        self._lead = " " if _is_byte_level(_pre_tokenizer_state(self._tokenizer)) else ""
        self.prefix, self.suffix = _special_tokens(self._tokenizer)
        self.window = text_window(max_length, len(self.prefix) + len(self.suffix))
        self.pad_id = pad_id
        self.stats = EncodeStats()

    def backend_json(self) -> str:
        """The tokenizer as JSON, to build the same encoder in another process."""
        return self._tokenizer.to_str()

    def encode(
        self,
        sentences: Sequence[MatchedSentence],
        targets: Sequence[TargetSentence | None] | None = None,
    ) -> list[EncoderInput]:
        """Encode sentences that hold occurrences; returns one input per window used.

        ``targets``: per sentence, what its input carries for the sentence targets; a sentence
        read in windows holds none (its teacher's vector would be of a part of it).
        """
        encodings = self._tokenizer.encode_batch(
            [self._lead + s.text for s in sentences], add_special_tokens=False
        )
        token_ids = [encoding.ids for encoding in encodings]
        lengths = _lengths(token_ids)
        token_bounds = np.concatenate([[0], np.cumsum(lengths)])
        ids = _flat(token_ids, int(token_bounds[-1]))
        occurrences, sentence_of = self._locate(encodings, sentences, token_bounds)
        has_subwords = occurrences[:, 1] > occurrences[:, 0]
        self.stats.sentences_encoded += len(sentences)
        self.stats.occurrences_without_subwords += int((~has_subwords).sum())
        occurrences = occurrences[has_subwords]
        counts = np.bincount(sentence_of[has_subwords], minlength=len(sentences))
        occurrence_bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
        # In a sentence that fits one window, tokens move right by the prefix's length.
        shifted = occurrences.copy()
        shifted[:, :2] += len(self.prefix)
        starts_ends = token_bounds.tolist()
        inputs: list[EncoderInput] = []
        for index in range(len(sentences)):
            start, end = starts_ends[index], starts_ends[index + 1]
            first, last = occurrence_bounds[index], occurrence_bounds[index + 1]
            if end - start > self.window:
                inputs.extend(self._windows(ids[start:end], occurrences[first:last]))
            elif last > first:
                self.stats.windows += 1
                window_ids = np.concatenate([self.prefix, ids[start:end], self.suffix])
                target = targets[index] if targets is not None else None
                inputs.append(EncoderInput(window_ids, shifted[first:last], target))
        return inputs

    def _locate(
        self, encodings: list, sentences: Sequence[MatchedSentence], token_bounds: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every sentence's occurrences as token ranges within it, and each one's sentence.

        The sentences' tokens and spans are laid end to end, so that the whole chunk takes a few
        array operations rather than a dozen per sentence. ``token_bounds``: where each
        sentence's tokens start, and where the last one's end.
        """
        token_starts, lengths = token_bounds[:-1], np.diff(token_bounds)
        offsets = _flat((e.offsets for e in encodings), 2 * int(token_bounds[-1]), nested=True)
        span_counts = _lengths([s.spans for s in sentences])
        spans = _flat((s.spans for s in sentences), 3 * int(span_counts.sum()), nested=True)
        offsets, spans = offsets.reshape(-1, 2), spans.reshape(-1, 3)
        # Gaps keep sentences apart: a sentence's offsets run from -len(lead) to len(text), and
        # a zero-width token at its end reaches one character further.
        gap = len(self._lead) + 2
        widths = np.fromiter((len(s.text) + gap for s in sentences), np.int64, len(sentences))
        char_starts = np.cumsum(widths) - widths
        offsets += np.repeat(char_starts, lengths)[:, None] - len(self._lead)
        sentence_of = np.repeat(np.arange(len(sentences)), span_counts)
        spans[:, :2] += char_starts[sentence_of, None]
        occurrences = locate_subwords(offsets, spans, (token_bounds[1:] - 1)[lengths > 0])
        occurrences[:, :2] -= token_starts[sentence_of, None]
        return occurrences, sentence_of

    def _windows(self, ids: np.ndarray, occurrences: np.ndarray) -> Iterator[EncoderInput]:
        starts = window_starts(len(ids), self.window)
        if len(starts) > 1:
            self.stats.split_sentences += 1
        chosen = choose_windows(occurrences, starts, self.window)
        self.stats.occurrences_too_long += int((chosen < 0).sum())
        for index, start in enumerate(starts):
            mine = occurrences[chosen == index]
            if not len(mine):
                continue
            self.stats.windows += 1
            shift = len(self.prefix) - start
            window_ids = np.concatenate(
                [self.prefix, ids[start : start + self.window], self.suffix]
            ).astype(np.int64)
            rebased = mine.copy()
            rebased[:, :2] += shift
            yield EncoderInput(window_ids, rebased)


def _lengths(lists: Sequence[Sequence]) -> np.ndarray:
    return np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))


def _flat(lists: Iterable, count: int, nested: bool = False) -> np.ndarray:
    """Lists (of numbers, or with ``nested`` of tuples of numbers) as one flat int64 array."""
    values = itertools.chain.from_iterable(lists)
    if nested:
        values = itertools.chain.from_iterable(values)
    return np.fromiter(values, dtype=np.int64, count=count)


def _plain_copy(backend: Tokenizer) -> Tokenizer:
    """Copy without padding or truncation."""
    # Parsed once, in Rust, with no round trip through Python's json: every worker process
    # builds one as the pass begins.
    copy = Tokenizer.from_str(backend.to_str())
    copy.no_padding()
    copy.no_truncation()
    return copy


def _pre_tokenizer_state(tokenizer: Tokenizer) -> dict | None:
    """The pre-tokenizer's settings, from the JSON of that part alone (not the whole tokenizer).

    ``__getstate__`` returns it as ``tokenizers`` serializes it: JSON, not a pickle.
    """
    pre_tokenizer = tokenizer.pre_tokenizer
    return None if pre_tokenizer is None else json.loads(pre_tokenizer.__getstate__())


def _is_byte_level(pre_tokenizer: dict | None) -> bool:
    """Whether the pre-tokenizer is (or contains) GPT-2 style byte-level splitting."""
    if not pre_tokenizer:
        return False
    inner = pre_tokenizer.get("pretokenizers") or ()
    return pre_tokenizer.get("type") == "ByteLevel" or any(_is_byte_level(p) for p in inner)


def text_window(max_length: int, special_tokens: int) -> int:
    """Text tokens in an input of ``max_length`` tokens, ``special_tokens`` of them special.

    Raises:
        ConfigError: Fewer than :data:`MIN_WINDOW` tokens are left for the text.

    """
    if max_length - special_tokens < MIN_WINDOW:
        raise ConfigError(
            f"{max_length} leaves {max(max_length - special_tokens, 0)} of the {MIN_WINDOW} "
            f"tokens of text a window needs beside this model's {special_tokens} special tokens; "
            f"use at least {special_tokens + MIN_WINDOW}",
            field="max_length",
        )
    return max_length - special_tokens


def count_special_tokens(backend: Tokenizer) -> int:
    """How many special tokens the tokenizer adds around one sequence."""
    return sum(len(part) for part in _special_tokens(_plain_copy(backend)))


def _special_tokens(tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """The special token ids the tokenizer puts before and after one sequence."""
    encoding = tokenizer.encode("a", add_special_tokens=True)
    mask = np.asarray(encoding.special_tokens_mask, dtype=bool)
    ids = np.asarray(encoding.ids, dtype=np.int64)
    content = np.flatnonzero(~mask)
    return ids[: content[0]], ids[content[-1] + 1 :]


def locate_subwords(
    offsets: np.ndarray, spans: np.ndarray, last_tokens: np.ndarray | None = None
) -> np.ndarray:
    """Token range of each character span: the tokens whose offsets overlap it.

    A zero-width token (a byte-level space marker that BPE split off) belongs to the token after it.

    Args:
        offsets: ``[n, 2]`` character offsets of the tokens, in order: of one sentence, or of
            several laid end to end with character ranges that do not overlap.
        spans: ``[k, 3]`` rows of ``(start_char, end_char, entry_id)``, on the same characters.
        last_tokens: The index of each sentence's last token (default: one sentence); a
            zero-width token there has no token after it to belong to.

    Returns:
        ``[k, 3]`` rows of ``(first_token, end_token, entry_id)``; ``first == end`` when no token
        overlaps the span.

    """
    n = len(offsets)
    starts, ends = offsets[:, 0], offsets[:, 1]
    zero_width = ends <= starts
    anchors = ~zero_width
    anchors[np.arange(n)[-1:] if last_tokens is None else last_tokens] = True
    # Each token takes the start of the first anchor at or after it (an anchor, its own start).
    anchor_at = np.where(anchors, np.arange(n), n)
    next_anchor = np.minimum.accumulate(anchor_at[::-1])[::-1]
    starts = starts[next_anchor]
    ends = np.maximum(ends, starts + zero_width)
    first = np.searchsorted(ends, spans[:, 0], side="right")
    end = np.searchsorted(starts, spans[:, 1], side="left")
    return np.stack([first, np.maximum(end, first), spans[:, 2]], axis=1)


def window_starts(n_tokens: int, window: int) -> list[int]:
    """Start of each window over ``n_tokens`` tokens; windows overlap by half their size."""
    if n_tokens <= window:
        return [0]
    stride = max(1, window // 2)
    starts = list(range(0, n_tokens - window, stride))
    return starts + [n_tokens - window]


def choose_windows(occurrences: np.ndarray, starts: list[int], window: int) -> np.ndarray:
    """Index of the window where each occurrence sits most centrally, or -1 if none holds it."""
    begin = np.asarray(starts)[None, :]
    first, end = occurrences[:, :1], occurrences[:, 1:2]
    margin = np.minimum(first - begin, begin + window - end)
    best = margin.argmax(axis=1)
    fits = margin[np.arange(len(occurrences)), best] >= 0
    return np.where(fits, best, -1)
