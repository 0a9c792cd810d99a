"""Masked-LM training data: corpus sentences packed into blocks of whole sentences, streamed.

The corpus is read, segmented by spaCy and tokenized lazily, so memory does not grow with its size;
every pass yields the same blocks in the same order, which is what lets a resumed run skip exactly
the batches it has already trained on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import IterableDataset

from .corpus import Corpus
from .segment import segment


def held_out(number: int, fraction: float) -> bool:
    """Whether sentence ``number`` (counted from 0) is in the held-out share ``fraction``.

    Spread evenly through the corpus: with 0.25, every fourth sentence.

    Example:
        >>> [n for n in range(10) if held_out(n, 0.25)]
        [3, 7]

    """
    return int((number + 1) * fraction) > int(number * fraction)


class SentenceBlocks(IterableDataset):
    """Blocks of at most ``max_length`` tokens (special tokens included) of consecutive sentences.

    A sentence is cut only when it alone is longer than a block. ``held_out_part`` picks the
    held-out sentences (``eval_fraction`` of them) instead of the training ones.

    Args:
        corpus: The corpus to read (re-iterated on every pass).
        nlp: The spaCy segmenter (see :func:`roberta_static.segment.load_segmenter`).
        tokenizer: The model's fast tokenizer.
        max_length: Longest block in tokens.
        eval_fraction: Share of sentences held out for evaluation.
        held_out_part: Yield the held-out sentences rather than the training ones.

    """

    def __init__(
        self,
        corpus: Corpus,
        nlp: Any,
        tokenizer: Any,
        max_length: int,
        eval_fraction: float,
        held_out_part: bool = False,
    ) -> None:
        super().__init__()
        self.corpus, self.nlp, self.tokenizer = corpus, nlp, tokenizer
        self.prefix, self.suffix = special_tokens(tokenizer)
        self.room = max_length - len(self.prefix) - len(self.suffix)
        self.eval_fraction, self.held_out_part = eval_fraction, held_out_part

    def sentences(self) -> Iterator[str]:
        """The text of this part's sentences, in corpus order."""
        number = 0
        for doc, _ in segment(self.nlp, self.corpus.units()):
            for sentence in doc.sents:
                text = sentence.text.strip()
                if text:
                    if held_out(number, self.eval_fraction) == self.held_out_part:
                        yield text
                    number += 1

    def __iter__(self) -> Iterator[dict[str, list[int]]]:
        block: list[int] = []
        for text in self.sentences():
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            if block and len(block) + len(ids) > self.room:
                yield self._wrap(block)
                block = []
            while len(ids) > self.room:  # one sentence longer than a block
                yield self._wrap(ids[: self.room])
                ids = ids[self.room :]
            block += ids
        if block:
            yield self._wrap(block)

    def _wrap(self, ids: list[int]) -> dict[str, list[int]]:
        return {"input_ids": self.prefix + ids + self.suffix}


def special_tokens(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The ids the tokenizer puts before and after one sequence (``<s>`` and ``</s>``, say).

    Read off an encoding, since transformers 5 dropped ``build_inputs_with_special_tokens``.
    """
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return full[:start], full[start + len(bare) :]
    return [], []


class SeededMasking:
    """A collator whose masks depend only on the seed and the batch's number, not on torch's RNG.

    A resumed run replays the batches it skips through the collator, after the Trainer restored
    torch's RNG state; numbering the batches keeps its masks those of an uninterrupted run.

    Args:
        collator: The masking collator (``DataCollatorForLanguageModeling``).
        seed: The run's seed.

    """

    def __init__(self, collator: Any, seed: int) -> None:
        self.collator, self.seed, self.calls = collator, seed, 0

    def __call__(self, features: list[dict[str, Any]]) -> Any:
        """Mask one batch with the generator of its number."""
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed * 1_000_003 + self.calls)
            self.calls += 1
            return self.collator(features)
