"""The layer view: one word in one sentence, followed up the encoder's layers.

At each layer, how close the word's contextual vector is to its static vector, and which tokens it
attends to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, VectorsError
from ..vectors.static import StaticVectors
from .model_match import ModelMatch, check_model

TOP_ATTENDED = 5


@dataclass
class LayerView:
    """A word in a sentence through the encoder.

    Attributes:
        sentence: The sentence.
        word: The word, as looked up.
        cosines: Per layer (0 = embeddings), the cosine between the word's contextual vector
            (its subwords' mean) and its static vector.
        attention: Per block, the ``TOP_ATTENDED`` tokens the word's subwords attend to most
            (heads and subwords averaged), as ``(token, weight)``.
        model: The model used, against the one the vectors were distilled with (set by
            :func:`load_layer_view`, which loads it by name).

    """

    sentence: str
    word: str
    cosines: list[float]
    attention: list[list[tuple[str, float]]]
    model: ModelMatch | None = None


def layer_view(
    model: Any, tokenizer: Any, vectors: StaticVectors, sentence: str, word: str
) -> LayerView:
    """Run ``sentence`` through ``model`` and follow ``word`` (its first occurrence) up the layers.

    Raises:
        ConfigError: ``word`` is not in ``sentence``, or the vectors are not in the model's space.
        VectorsError: the vectors were post-processed (see :func:`require_model_space`).

    """
    from ..model.layers import word_layers  # torch: the checks before the run need none

    start = locate_word(vectors, sentence, word)
    static = np.asarray(vectors[word], dtype=np.float64)
    found = word_layers(model, tokenizer, sentence, start, start + len(word))
    if found is None:
        raise ConfigError(f"{word!r} falls outside the model's input window", field="word")
    hidden = found.hidden
    if hidden[0].shape != static.shape:
        raise ConfigError(
            f"the vectors have {static.shape[0]} dimensions and the model's layers "
            f"{hidden[0].shape[0]}: use the model the vectors were distilled with, without "
            "--combine concat or --pca",
            field="model",
        )
    attention = []
    for mean in found.attention:
        top = np.argsort(-mean, kind="stable")[:TOP_ATTENDED]
        attention.append([(found.tokens[i], round(float(mean[i]), 3)) for i in top])
    return LayerView(sentence, word, [round(_cosine(h, static), 4) for h in hidden], attention)


def load_layer_view(
    model: str,
    vectors: StaticVectors,
    sentence: str,
    word: str,
    *,
    allow_other_model: bool = False,
    trust_remote_code: bool = False,
    allow_pickle: bool = False,
) -> LayerView:
    """Load the model named ``model`` (as ``distill`` names one), then :func:`layer_view`.

    Args:
        model: A hub id, a local folder, ``minilm`` or ``spacy:PIPELINE``: the model the vectors
            were distilled with (checked against ``meta.json``: see :mod:`.model_match`).
        vectors: The vectors, as distilled (not post-processed).
        sentence: A sentence holding ``word``.
        word: The word to follow up the layers.
        allow_other_model: Use ``model`` even when it is not the vectors' model; the view's
            ``model`` says so.
        trust_remote_code: Run model code from the hub.
        allow_pickle: Load pickled ``.bin`` weights when there is no safetensors file.

    Raises:
        ModelLoadError: The model cannot load.
        ConfigError: ``model`` is not the vectors' model (field ``model``), or as
            :func:`layer_view`.

    Example:
        >>> view = load_layer_view("minilm", vectors, "The cat sat.", "cat")  # doctest: +SKIP

    """
    from ..config import DistillConfig
    from ..model.loading import load_pretrained

    match = check_model(vectors.meta.get("model") or {}, model, allow_other_model)
    config = DistillConfig(
        model=model, trust_remote_code=trust_remote_code, allow_pickle=allow_pickle
    )
    encoder, tokenizer = load_pretrained(config)
    view = layer_view(encoder, tokenizer, vectors, sentence, word)
    view.model = match
    return view


def require_model_space(vectors: StaticVectors, where: str = "the vectors") -> None:
    """Refuse vectors that post-processing moved out of the model's space (``where`` names them).

    Centering and removing components move every vector; scaling to unit length (``normalize``)
    leaves every cosine as it was, so it is allowed.
    """
    moved = [
        name
        for step in vectors.meta.get("postprocessing", [])
        for name in ("center", "remove_top_pcs", "pca")
        if step.get(name)
    ]
    if moved:
        raise VectorsError(
            f"{where}: post-processed ({', '.join(dict.fromkeys(moved))}), so no longer in the "
            "model's space; the layer view needs the vectors as distilled, without post-processing"
        )


def locate_word(
    vectors: StaticVectors, sentence: str, word: str, where: str = "the vectors"
) -> int:
    """Where ``word`` starts in ``sentence``, once the view's checks that need no model pass.

    Raises:
        VectorsError: The vectors were post-processed (see :func:`require_model_space`).
        KeyNotFoundError: ``word`` has no vector.
        ConfigError: ``word`` is not in ``sentence``.

    """
    require_model_space(vectors, where)
    vectors.get_index(word)
    return _find(sentence, word, vectors.case == "lower")


def _find(sentence: str, word: str, lower: bool) -> int:
    """Where ``word`` first occurs in ``sentence`` (ignoring case under the ``lower`` policy)."""
    start = (sentence.lower() if lower else sentence).find(word.lower() if lower else word)
    if start < 0:
        raise ConfigError(f"{word!r} does not occur in the sentence", field="word")
    return start


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))
