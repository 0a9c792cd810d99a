"""One word in one sentence through every layer of a model: what the report's layer view shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass
class WordLayers:
    """A word's subwords through the model, as numpy.

    Attributes:
        tokens: The sentence's tokens.
        hidden: Per layer (0 = embeddings), the mean of the word's subwords' states.
        attention: Per block, each token's weight in what the word's subwords attend to (heads
            and subwords averaged); empty when the model returns no attention weights.

    """

    tokens: list[str]
    hidden: list[np.ndarray]
    attention: list[np.ndarray]


def word_layers(
    model: Any, tokenizer: Any, sentence: str, start: int, end: int
) -> WordLayers | None:
    """Run ``sentence`` through ``model`` and follow the word at characters ``start:end``.

    Returns None, before running the model, when no token covers the word (it lies past the
    model's input window).
    """
    encoded = tokenizer(sentence, return_offsets_mapping=True, return_tensors="pt", truncation=True)
    offsets = encoded.pop("offset_mapping")[0].tolist()
    rows = [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]
    if not rows:
        return None
    _eager_attention(model)
    with torch.no_grad():
        output = model(**encoded, output_hidden_states=True, output_attentions=True)
    return WordLayers(
        tokenizer.convert_ids_to_tokens(encoded["input_ids"][0]),
        [state[0, rows].float().mean(dim=0).cpu().numpy() for state in output.hidden_states],
        [
            weights[0].float().mean(dim=0)[rows].mean(dim=0).cpu().numpy()
            for weights in output.attentions or ()
        ],
    )


def _eager_attention(model: Any) -> None:
    """Ask for attention weights the model can return: fused kernels (SDPA) return none."""
    if hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation("eager")
        except (ValueError, NotImplementedError):
            pass  # a model without an eager path: its attention table stays empty
