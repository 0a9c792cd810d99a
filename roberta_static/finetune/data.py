"""Masked-LM training data: corpus sentences packed into blocks of whole sentences, streamed.

The corpus is read, segmented by spaCy and tokenized lazily, so memory does not grow with its size;
every pass yields the same blocks in the same order, which is what lets a resumed run skip exactly
the batches it has already trained on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import IterableDataset

from ..text.corpus import Corpus
from ..text.segment import segment


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
        nlp: The spaCy segmenter (a pipeline, or a :class:`~roberta_static.text.segment.Segmenter`).
        tokenizer: The model's fast tokenizer.
        max_length: Longest block in tokens.
        eval_fraction: Share of sentences held out for evaluation.
        held_out_part: Yield the held-out sentences rather than the training ones.
        offsets: Give each block its tokens' character offsets too (``offset_mapping``), which
            tell whole-word masking where words start.

    """

    def __init__(
        self,
        corpus: Corpus,
        nlp: Any,
        tokenizer: Any,
        max_length: int,
        eval_fraction: float,
        held_out_part: bool = False,
        offsets: bool = False,
    ) -> None:
        super().__init__()
        self.corpus, self.nlp, self.tokenizer = corpus, nlp, tokenizer
        self.prefix, self.suffix = special_tokens(tokenizer)
        self.room = max_length - len(self.prefix) - len(self.suffix)
        self.eval_fraction, self.held_out_part = eval_fraction, held_out_part
        self.offsets = offsets

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

    def __iter__(self) -> Iterator[dict[str, list]]:
        block: list[tuple[int, tuple[int, int]]] = []  # (token id, character offsets)
        # Offsets count on through the text, one space between sentences: the last word of one
        # sentence never runs on into the next.
        start = 0
        for text in self.sentences():
            encoding = self.tokenizer(
                text, add_special_tokens=False, return_offsets_mapping=self.offsets
            )
            spans = encoding.get("offset_mapping") or _NO_SPAN * len(encoding["input_ids"])
            tokens = [
                (i, (start + a, start + b))
                for i, (a, b) in zip(encoding["input_ids"], spans, strict=True)
            ]
            if block and len(block) + len(tokens) > self.room:
                yield self._wrap(block)
                block = []
            while len(tokens) > self.room:  # one sentence longer than a block
                yield self._wrap(tokens[: self.room])
                tokens = tokens[self.room :]
            block += tokens
            start += len(text) + 1
        if block:
            yield self._wrap(block)

    def _wrap(self, tokens: list[tuple[int, tuple[int, int]]]) -> dict[str, list]:
        block: dict[str, list] = {"input_ids": self.prefix + [i for i, _ in tokens] + self.suffix}
        if self.offsets:
            spans = [span for _, span in tokens]
            block["offset_mapping"] = (
                _NO_SPAN * len(self.prefix) + spans + _NO_SPAN * len(self.suffix)
            )
        return block


_NO_SPAN = [(0, 0)]


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
        collator: The masking collator (see :func:`masking_collator`).
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


def masking_collator(tokenizer: Any, mlm_probability: float, whole_words: bool) -> Any:
    """The collator that pads and masks a batch: single tokens, or whole words.

    Whole words need blocks made with ``offsets=True`` (see :class:`SentenceBlocks`).
    """
    if whole_words:
        return WholeWordMasking(tokenizer, mlm_probability)
    from transformers import DataCollatorForLanguageModeling

    return DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=mlm_probability)


class WholeWordMasking:
    """A collator that masks all the tokens of a word or none.

    Words are runs of tokens with no gap between their character offsets (the blocks'
    ``offset_mapping``), so ``##s`` joins the token before it and ``Ġcat`` does not, for BERT and
    RoBERTa tokenizers alike.

    transformers 5 does the masking (``DataCollatorForLanguageModeling(whole_word_mask=True)``)
    once the offsets are padded, which it leaves to the caller. transformers 4.5x's
    ``DataCollatorForWholeWordMask`` knows only BERT's ``##`` subwords, so there :meth:`_mask`
    does what transformers 5 does, drawing the same random numbers. Masked words are always
    replaced by the mask token, as transformers 5 has it.

    Args:
        tokenizer: The model's fast tokenizer.
        mlm_probability: Share of words masked.

    """

    def __init__(self, tokenizer: Any, mlm_probability: float) -> None:
        from transformers import DataCollatorForLanguageModeling

        self.tokenizer, self.mlm_probability = tokenizer, mlm_probability
        self.library = None
        if "whole_word_mask" in DataCollatorForLanguageModeling.__dataclass_fields__:
            self.library = DataCollatorForLanguageModeling(
                tokenizer,
                whole_word_mask=True,
                mlm_probability=mlm_probability,
                mask_replace_prob=1.0,
                random_replace_prob=0.0,
            )

    def __call__(self, features: list[dict[str, Any]]) -> Any:
        """Pad and mask one batch of blocks that carry ``offset_mapping``."""
        features = self._pad_offsets(features)
        return self._mask(features) if self.library is None else self.library(features)

    def _pad_offsets(self, features: list[dict[str, Any]]) -> list[dict[str, Any]]:
        longest = max(len(f["input_ids"]) for f in features)
        padded = []
        for feature in features:
            padding = _NO_SPAN * (longest - len(feature["input_ids"]))
            spans = list(feature["offset_mapping"])
            spans = padding + spans if self.tokenizer.padding_side == "left" else spans + padding
            padded.append({**feature, "offset_mapping": spans})
        return padded

    def _mask(self, features: list[dict[str, Any]]) -> Any:
        import torch
        from transformers.data.data_collator import pad_without_fast_tokenizer_warning

        ids = [{"input_ids": f["input_ids"]} for f in features]
        batch = pad_without_fast_tokenizer_warning(self.tokenizer, ids, return_tensors="pt")
        inputs = batch["input_ids"]
        special = torch.tensor(
            [
                self.tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True)
                for row in inputs.tolist()
            ],
            dtype=torch.bool,
        )
        spans = torch.tensor([f["offset_mapping"] for f in features])
        previous_end = spans[..., 1].roll(1, dims=1)
        previous_end[:, 0] = -1
        after_special = special.roll(1, dims=1)
        after_special[:, 0] = False
        word_start = ~special & ((spans[..., 0] != previous_end) | after_special)
        words = word_start.cumsum(dim=1)  # each token's word number in its row
        chosen = torch.bernoulli(word_start * self.mlm_probability).bool()
        picked = torch.zeros(inputs.shape[0], inputs.shape[1] + 1, dtype=torch.bool)
        rows, columns = chosen.nonzero(as_tuple=True)
        picked[rows, words[rows, columns]] = True
        masked = picked.gather(1, words) & ~special
        batch["labels"] = inputs.masked_fill(~masked, -100)
        batch["input_ids"] = inputs.masked_fill(masked, self.tokenizer.mask_token_id)
        return batch
