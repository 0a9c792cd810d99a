"""Post-processing of static vectors: centering, all-but-the-top, PCA, normalising (numpy only).

Contextual encoders give anisotropic vectors (a large common direction; random pairs have a high
cosine). Removing the mean and the top principal components corrects that (Mu & Viswanath, 2018,
"All-but-the-Top").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TypeVar

import numpy as np

from ..errors import ConfigError, require_minimums
from .data import VectorData

# The least value of each numeric step (``pca=None`` means no PCA); the CLI declares them too.
MINIMUMS = {"remove_top_pcs": 0, "pca": 1}


@dataclass(frozen=True)
class PostProcessing:
    """Which steps to apply, in this order: center, remove top PCs, PCA, normalize.

    Args:
        center: Subtract the mean vector.
        remove_top_pcs: Remove the projection on this many top principal components (implies
            centering).
        pca: Reduce to this many dimensions with PCA (implies centering).
        normalize: Scale every vector to unit length.

    """

    center: bool = False
    remove_top_pcs: int = 0
    pca: int | None = None
    normalize: bool = False

    def __post_init__(self) -> None:
        require_minimums(self, MINIMUMS)

    @property
    def is_identity(self) -> bool:
        """Whether no step is enabled."""
        return self == PostProcessing()

    def apply(self, matrix: np.ndarray) -> np.ndarray:
        """Return the processed copy of a ``[n, d]`` matrix."""
        result = np.asarray(matrix, dtype=np.float64)
        for name in ("remove_top_pcs", "pca"):  # the steps that take principal components
            count = getattr(self, name) or 0
            if count > min(result.shape):
                raise ConfigError(
                    f"asked for {count} principal components of a {result.shape} matrix", field=name
                )
        if self.center or self.remove_top_pcs or self.pca:
            result = result - result.mean(axis=0)
        if self.remove_top_pcs:
            result = remove_top_components(result, self.remove_top_pcs)
        if self.pca:
            result = pca_project(result, self.pca)
        if self.normalize:
            result = normalize_rows(result)
        return result.astype(np.float32)


def principal_axes(centered: np.ndarray, count: int) -> np.ndarray:
    """The top ``count`` principal directions (rows, up to sign) of centred data."""
    limit = min(centered.shape)
    if count > limit:
        raise ConfigError(f"asked for {count} principal components of a {centered.shape} matrix")
    rows, dim = centered.shape
    if rows <= dim:
        _, _, vt = np.linalg.svd(centered, full_matrices=False)
        return vt[:count]
    # The eigenvectors of the [dim, dim] scatter matrix are the right singular vectors: for a
    # vocabulary (rows >> dim) far faster than its SVD (100,000 x 768: seconds, not minutes).
    _, vectors = np.linalg.eigh(centered.T @ centered)
    return vectors[:, ::-1][:, :count].T


def remove_top_components(centered: np.ndarray, count: int) -> np.ndarray:
    """Subtract each row's projection on the top ``count`` principal directions."""
    return remove_axes(centered, principal_axes(centered, count))


def remove_axes(centered: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """Subtract each row's projection on ``axes``, orthonormal rows such as :func:`principal_axes`.

    Axes found once on a vocabulary's centred matrix map any of its rows later, as all-but-the-top
    maps the whole matrix.
    """
    return centered - (centered @ axes.T) @ axes


def pca_project(centered: np.ndarray, dim: int) -> np.ndarray:
    """Coordinates of centred rows on the top ``dim`` principal directions."""
    return centered @ principal_axes(centered, dim).T


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1)


Vectors = TypeVar("Vectors", bound=VectorData)


def postprocess(vectors: Vectors, steps: PostProcessing) -> Vectors:
    """Apply ``steps`` and record them in the metadata's ``postprocessing`` list.

    The result is of the class of ``vectors`` (a ``StaticVectors`` gives a ``StaticVectors``).

    Example:
        >>> vecs = VectorData(["a", "b"], np.array([[1.0, 2.0], [3.0, 2.0]]), np.array([1, 1]))
        >>> postprocess(vecs, PostProcessing(center=True)).vectors.tolist()
        [[-1.0, 0.0], [1.0, 0.0]]

    """
    meta = dict(vectors.meta)
    meta["postprocessing"] = [*meta.get("postprocessing", []), asdict(steps)]
    return replace(
        vectors, words=list(vectors.words), vectors=steps.apply(vectors.vectors), meta=meta
    )


def anisotropy(matrix: np.ndarray, pairs: int = 10_000, seed: int = 0) -> float:
    """Mean cosine similarity of random pairs of distinct rows (0 for an isotropic space)."""
    rng = np.random.default_rng(seed)
    n = len(matrix)
    if n < 2:
        return 0.0
    first = rng.integers(0, n, pairs)
    second = (first + rng.integers(1, n, pairs)) % n
    unit = normalize_rows(np.asarray(matrix, dtype=np.float64))
    return float((unit[first] * unit[second]).sum(axis=1).mean())
