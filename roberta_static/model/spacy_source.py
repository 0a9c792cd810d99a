"""Use the transformer inside an installed spacy-transformers pipeline as the encoder.

``--model spacy:en_core_web_trf`` lets users of such a pipeline distill from the RoBERTa they
already have, with no separate download. Needs the ``trf`` extra.
"""

from __future__ import annotations

from typing import Any

import spacy

from roberta_static.errors import ModelLoadError, install_hint

PREFIX = "spacy:"


def load_from_spacy_pipeline(spec: str) -> tuple[Any, Any]:
    """The Hugging Face model and tokenizer of the pipeline named in ``spacy:NAME_OR_PATH``."""
    name = spec.removeprefix(PREFIX)
    try:
        from spacy_transformers import Transformer
    except ImportError:
        raise ModelLoadError(f"{spec}: needs spacy-transformers: {install_hint('trf')}") from None
    try:
        nlp = spacy.load(name)
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{spec}: cannot load the spaCy pipeline ({error})") from None
    component = next((pipe for _, pipe in nlp.components if isinstance(pipe, Transformer)), None)
    if component is None:
        raise ModelLoadError(f"{spec}: the pipeline has no transformer component")
    return component.model.transformer, component.model.tokenizer
