from __future__ import annotations

import numpy as np
import pytest

from roberta_static.errors import ConfigError
from roberta_static.vectors.postprocess import PostProcessing, anisotropy, postprocess
from roberta_static.vectors.static import StaticVectors


@pytest.fixture()
def matrix():
    rng = np.random.default_rng(7)
    common = rng.normal(size=8) * 5  # a shared direction, as in anisotropic encoder spaces
    return (rng.normal(size=(40, 8)) + common).astype(np.float32)


def top_eigenvectors(x, count):
    """Principal directions from the covariance matrix's eigen-decomposition (not the SVD)."""
    centered = x - x.mean(0)
    values, vectors = np.linalg.eigh(centered.T @ centered)
    return vectors[:, np.argsort(values)[::-1][:count]].T


def test_center(matrix):
    result = PostProcessing(center=True).apply(matrix)
    np.testing.assert_allclose(result, matrix - matrix.mean(0), atol=1e-5)


def test_remove_top_components_matches_eigen_reference(matrix):
    result = PostProcessing(remove_top_pcs=2).apply(matrix)
    centered = matrix.astype(np.float64) - matrix.mean(0)
    expected = centered.copy()
    for direction in top_eigenvectors(matrix, 2):
        expected -= np.outer(centered @ direction, direction)
    np.testing.assert_allclose(result, expected, atol=1e-4)


def test_pca_matches_eigen_reference_up_to_sign(matrix):
    result = PostProcessing(pca=3).apply(matrix)
    expected = (matrix - matrix.mean(0)) @ top_eigenvectors(matrix, 3).T
    assert result.shape == (40, 3)
    np.testing.assert_allclose(np.abs(result), np.abs(expected), atol=1e-4)


def test_normalize_and_anisotropy(matrix):
    unit = PostProcessing(normalize=True).apply(matrix)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
    assert anisotropy(matrix) > 0.5 > abs(anisotropy(PostProcessing(center=True).apply(matrix)))
    same = np.tile([1.0, 2.0], (5, 1))
    assert anisotropy(same) == pytest.approx(1.0)


def test_postprocess_records_steps_and_rejects_bad_values(matrix):
    vectors = StaticVectors(
        [f"w{i}" for i in range(40)], matrix, np.ones(40), {"postprocessing": []}
    )
    result = postprocess(vectors, PostProcessing(center=True, normalize=True))
    assert result.meta["postprocessing"] == [
        {"center": True, "remove_top_pcs": 0, "pca": None, "normalize": True}
    ]
    with pytest.raises(ConfigError, match="remove_top_pcs: must be >= 0"):
        PostProcessing(remove_top_pcs=-1)
    with pytest.raises(ConfigError, match="pca: asked for 9 principal components"):
        PostProcessing(pca=9).apply(matrix)
    with pytest.raises(ConfigError, match="remove_top_pcs: asked for 9 principal components"):
        PostProcessing(remove_top_pcs=9).apply(matrix)
