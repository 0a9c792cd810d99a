"""SIF weights (Arora et al., 2017, "A simple but tough-to-beat baseline for sentence embeddings").

A word's weight is ``a / (a + p(word))``, ``p`` its share of the counts: frequent words weigh less
in a text's mean. A leaf (numpy only): the sentence-encoder exports and the document vectors of the
spaCy component both weigh words with it.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError


def check_sif_coefficient(coefficient: float | None) -> None:
    """Refuse a SIF coefficient outside (0, 1), as model2vec does."""
    if coefficient is not None and not 0 < coefficient < 1:
        raise ConfigError(f"must be between 0 and 1, got {coefficient}", field="sif_coefficient")


def sif_weights(counts: np.ndarray, coefficient: float) -> np.ndarray:
    """``a / (a + p(w))`` with ``p`` the share of each count (a count of 0 weighs 1).

    Example:
        >>> sif_weights(np.array([90, 10, 0]), 0.1).round(3).tolist()
        [0.1, 0.5, 1.0]

    """
    share = counts / max(int(counts.sum()), 1)
    return coefficient / (coefficient + share)
