"""A text's vector as the weighted sentence-encoder exports make it, for any vectors of the words.

The best document vectors of the Lee benchmark come from exporting post-processed vectors with SIF
weights (``distill --remove-top-pcs 4``, then ``export --sif-coefficient 1e-3``): each word's vector
is centred and stripped of the vocabulary's top principal components (all-but-the-top), then
scaled by its SIF weight, and a text's vector is the mean over its known words.
:class:`DocWeighting` holds what that needs (the mean, the components, the weights), found once
over a vocabulary, so that a text's words can be mapped at any time from the plain vectors: the
spaCy component computes ``doc.vector`` with it. It uses the same functions as the exports
(:func:`~roberta_static.vectors.postprocess.principal_axes`, :func:`~.sif.sif_weights`).

Vectors ``tune`` made carry learned weights instead: a text's vector is then the mean of its
words' vectors times their learned weights, plus a learned offset, which is what ``tune`` trained
(:meth:`DocWeighting.learned`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from ..errors import ConfigError
from .data import VectorData
from .postprocess import PostProcessing, principal_axes, remove_axes
from .sif import check_sif_coefficient, sif_weights

DocVector = Literal["mean", "weighted"]
"""A spaCy ``doc.vector``: spaCy's mean of the token vectors, or this module's weighted one."""
DOC_VECTORS: tuple[str, ...] = get_args(DocVector)
# The spaCy component's defaults: "weighted" scores well above spaCy's mean on the Lee benchmark
# through doc.similarity, and 4 and 1e-3 are that benchmark's best export options
# (docs/benchmarks/documents.md).
DEFAULT_DOC_VECTOR: DocVector = "weighted"
REMOVE_TOP_PCS = 4
SIF_COEFFICIENT = 1e-3


@dataclass(frozen=True)
class DocWeighting:
    """The mean and top principal directions of a vocabulary's vectors, and each entry's weight.

    Attributes:
        mean: ``[dim]`` mean vector (zero when no components are removed: the export centres only
            with ``--remove-top-pcs``).
        axes: ``[remove_top_pcs, dim]`` top principal directions of the centred vectors.
        weights: SIF weight of each entry, in the vocabulary's row order.
        offset: ``[dim]`` added to a text's vector (zero but for tuned vectors).

    Example:
        >>> vecs = VectorData(["a", "b", "c"], np.eye(3), np.array([8, 1, 1]))
        >>> weighting = DocWeighting.fit(vecs, remove_top_pcs=0, sif_coefficient=0.5)
        >>> weighting.text_vector(vecs.vectors[[0, 1]], weighting.weights[[0, 1]]).round(2).tolist()
        [0.19, 0.42, 0.0]

    """

    mean: np.ndarray
    axes: np.ndarray
    weights: np.ndarray
    offset: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.offset is None:
            object.__setattr__(self, "offset", np.zeros(len(self.mean)))

    @classmethod
    def fit(
        cls,
        vectors: VectorData,
        remove_top_pcs: int,
        sif_coefficient: float | None,
    ) -> DocWeighting:
        """Find the weighting of ``vectors``, as ``postprocess`` and the exports would apply it.

        Tuned vectors (with learned :attr:`~.data.VectorData.weights`) take their own weighting
        instead (:meth:`learned`): ``remove_top_pcs`` and ``sif_coefficient`` are then unused.

        Args:
            vectors: The vocabulary's plain vectors and counts.
            remove_top_pcs: Principal components to remove, as ``--remove-top-pcs`` (the Lee
                benchmark's choice is 4, all-but-the-top's dimension / 100 for 384 dimensions).
            sif_coefficient: ``a`` of the SIF weights, as ``--sif-coefficient`` (the SIF
                paper's usual 1e-3); ``None``: every weight is 1.

        Raises:
            ConfigError: A negative ``remove_top_pcs``, more components than the vectors have, or
                a coefficient outside (0, 1).

        """
        cls.check(remove_top_pcs, sif_coefficient)
        if vectors.weights is not None:
            return cls.learned(vectors)
        centered = np.array(vectors.vectors, dtype=np.float64)  # a copy, centred in place
        mean = centered.mean(axis=0) if remove_top_pcs else np.zeros(vectors.dim)
        centered -= mean
        if too_few(len(centered), vectors.dim, remove_top_pcs):
            raise ConfigError(
                f"doc_vector 'weighted' removes {remove_top_pcs} principal components, too many "
                f"for {len(centered)} vectors of width {vectors.dim}: lower remove_top_pcs, or "
                "use doc_vector 'mean'",
                field="remove_top_pcs",
            )
        axes = principal_axes(centered, remove_top_pcs)
        if sif_coefficient is None:
            return cls(mean, axes, np.ones(len(vectors)))
        return cls(mean, axes, sif_weights(vectors.counts, sif_coefficient))

    @classmethod
    def learned(cls, vectors: VectorData) -> DocWeighting:
        """The weighting of tuned vectors: their learned weights and offset, nothing removed.

        ``tune`` learned the vectors, weights and offset for this plain weighted mean (any
        components it removed were removed before training), so none are removed again.
        """
        if vectors.weights is None:
            raise ConfigError("the vectors carry no learned weights (tune makes them)")
        none = np.zeros((0, vectors.dim))
        offset = None if vectors.offset is None else vectors.offset.astype(np.float64)
        return cls(np.zeros(vectors.dim), none, vectors.weights.astype(np.float64), offset)

    @staticmethod
    def check(remove_top_pcs: int, sif_coefficient: float | None) -> None:
        """Refuse a negative ``remove_top_pcs`` or a coefficient outside (0, 1)."""
        PostProcessing(remove_top_pcs=remove_top_pcs)
        check_sif_coefficient(sif_coefficient)

    def text_vector(self, rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The float32 vector of a text from its known words' plain vectors and their weights.

        Args:
            rows: ``[n, dim]`` vectors of the text's words found in the vocabulary (unknown words
                are left out, as model2vec leaves them out of its mean).
            weights: The ``n`` words' entries of :attr:`weights`.

        Returns:
            The mean of the weighted, post-processed rows, plus the offset; zeros for a text of
            no known word.

        """
        if not len(rows):
            return np.zeros(len(self.mean), dtype=np.float32)
        processed = remove_axes(np.asarray(rows, dtype=np.float64) - self.mean, self.axes)
        weighted = np.asarray(weights, dtype=np.float64) @ processed / len(processed)
        return (weighted + self.offset).astype(np.float32)


def too_few(count: int, dim: int, remove_top_pcs: int) -> bool:
    """Whether ``count`` vectors of width ``dim`` are too few to remove ``remove_top_pcs`` axes.

    All-but-the-top needs fewer components than there are vectors and dimensions: otherwise
    every centred vector would be emptied.
    """
    return remove_top_pcs > 0 and remove_top_pcs >= min(count, dim)
