"""The ridge map against a direct least-squares reference, its penalty choice, check and refusal."""

from __future__ import annotations

import numpy as np
import pytest

from roberta_static import ConfigError
from roberta_static.vectors.fill import (
    _RELATIVE_ALPHAS,
    MIN_FITTED,
    choose_alpha,
    fit_ridge,
    held_out_check,
    mapped_fill,
)


def noisy_linear(n: int, dim: int = 6, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim)) + 3.0
    y = x @ rng.normal(size=(dim, dim)) + rng.normal(size=dim) + 0.1 * rng.normal(size=(n, dim))
    return x, y


# Wider than tall with no penalty, the solution is not unique: no reference to compare with.
@pytest.mark.parametrize(("rows", "alpha"), [(40, 0.0), (40, 0.5), (40, 30.0), (4, 0.5), (4, 30.0)])
def test_ridge_equals_least_squares_on_the_augmented_system(alpha, rows):
    x, y = noisy_linear(rows)
    dim = x.shape[1]
    # [X 1; sqrt(alpha) I 0] [W; b] = [Y; 0]: the penalty rows leave the bias column out.
    design = np.vstack(
        [
            np.hstack([x, np.ones((len(x), 1))]),
            np.hstack([np.sqrt(alpha) * np.eye(dim), np.zeros((dim, 1))]),
        ]
    )
    targets = np.vstack([y, np.zeros((dim, dim))])
    solution = np.linalg.lstsq(design, targets, rcond=None)[0]
    mapping = fit_ridge(x, y, alpha)
    np.testing.assert_allclose(mapping.weights, solution[:dim], atol=1e-8)
    np.testing.assert_allclose(mapping.bias, solution[dim], atol=1e-8)


def test_penalty_is_the_least_generalized_cross_validation_error():
    x, y = noisy_linear(30, dim=10)
    xc, yc = x - x.mean(0), y - y.mean(0)
    scale = (np.linalg.svd(xc, compute_uv=False) ** 2).mean()

    def gcv(alpha):
        hat = xc @ np.linalg.solve(xc.T @ xc + alpha * np.eye(10), xc.T)
        return ((yc - hat @ yc) ** 2).sum() / (len(x) - 1 - np.trace(hat)) ** 2

    best = min(_RELATIVE_ALPHAS * scale, key=gcv)
    assert choose_alpha(x, y) == pytest.approx(best)


def test_held_out_check_compares_mapped_and_plain_on_a_tenth():
    x, y = noisy_linear(100)
    check = held_out_check(x, y)
    assert check["entries"] == 10
    assert check["mapped_cosine"] > 0.99 > check["decontextualized_cosine"]
    assert held_out_check(x, y) == check  # fixed seed


def test_mapped_fill_records_what_it_did():
    x, y = noisy_linear(50)
    filled, record = mapped_fill(x[:45], y[:45], x[45:])
    assert filled.shape == (5, x.shape[1]) and filled.dtype == np.float32
    np.testing.assert_allclose(filled, y[45:], atol=1.0)
    assert record["method"] == "mapped" and record["fitted_on"] == 45
    assert set(record["held_out"]) == {"entries", "mapped_cosine", "decontextualized_cosine"}


def test_the_fewest_seen_entries_allowed_fit_the_map_and_its_check():
    x, y = noisy_linear(MIN_FITTED)
    _, record = mapped_fill(x, y, x[:1])
    assert record["fitted_on"] == MIN_FITTED and record["held_out"]["entries"] == 2


def test_too_few_seen_entries_are_refused():
    x, y = noisy_linear(MIN_FITTED - 1)
    with pytest.raises(ConfigError, match=f"at least {MIN_FITTED} entries.*got {MIN_FITTED - 1}"):
        mapped_fill(x, y, x[:1])


def test_a_vocabulary_too_small_to_fit_is_refused_before_the_model_loads(tmp_path, monkeypatch):
    from roberta_static import DistillConfig, distill

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("roberta_static.api.load_pretrained", no_model)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat.\n")
    config = DistillConfig(model=str(tmp_path / "any"), fill_unseen="mapped")
    words = [f"w{i}" for i in range(MIN_FITTED - 1)]
    with pytest.raises(ConfigError, match=f"at least {MIN_FITTED} .* holds only {MIN_FITTED - 1}"):
        distill(corpus, words, config)
