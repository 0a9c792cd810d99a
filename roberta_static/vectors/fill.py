"""Fill entries the corpus never showed: a ridge map from decontextualized to contextual vectors.

An entry embedded alone (decontextualized) lands in another region of the space than the
context-averaged entries. Fitting a linear map on the entries that have both vectors, and applying
it to the decontextualized vectors of the unseen ones, puts the filled entries beside the others.
Only numpy is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError

MIN_FITTED = 20
"""Fewest seen entries the map is fitted on (fewer give a map that is mostly the penalty)."""

HELD_OUT = 0.1
# Penalties tried, as multiples of the mean squared singular value of the centered inputs, so the
# choice does not depend on the vectors' scale.
_RELATIVE_ALPHAS = np.logspace(-4, 1, 11)


@dataclass(frozen=True)
class LinearMap:
    """``x @ weights + bias``, row by row."""

    weights: np.ndarray
    bias: np.ndarray
    alpha: float

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The mapped rows of ``x``, as float32."""
        return (np.asarray(x, dtype=np.float64) @ self.weights + self.bias).astype(np.float32)


def fit_ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> LinearMap:
    """Ridge regression of ``y`` on ``x`` in closed form; the bias is not penalised.

    Example:
        >>> x = np.arange(6.0).reshape(3, 2)
        >>> fit_ridge(x, 2 * x + 1, alpha=0.0)(np.array([[1.0, 1.0]])).round(3).tolist()
        [[3.0, 3.0]]

    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    x_mean, y_mean = x.mean(axis=0), y.mean(axis=0)
    xc, yc = x - x_mean, y - y_mean
    # lstsq rather than solve: with alpha 0 the system may be singular (min-norm solution then).
    if x.shape[1] > len(x):  # wider than tall (every layer concatenated): the n x n dual form
        dual = xc @ xc.T + alpha * np.eye(len(x))
        weights = xc.T @ np.linalg.lstsq(dual, yc, rcond=None)[0]
    else:
        gram = xc.T @ xc + alpha * np.eye(x.shape[1])
        weights = np.linalg.lstsq(gram, xc.T @ yc, rcond=None)[0]
    return LinearMap(weights, y_mean - x_mean @ weights, float(alpha))


def choose_alpha(x: np.ndarray, y: np.ndarray) -> float:
    """The penalty with the least generalized cross-validation error (Golub, Heath, Wahba 1979).

    GCV estimates the leave-one-out error from one SVD, so no entry is set aside to choose it.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    xc, yc = x - x.mean(axis=0), y - y.mean(axis=0)
    u, s, _ = np.linalg.svd(xc, full_matrices=False)
    projected = u.T @ yc
    outside = max(float((yc**2).sum() - (projected**2).sum()), 0.0)
    squares = s**2
    alphas = _RELATIVE_ALPHAS * squares.mean()
    errors = []
    for alpha in alphas:
        shrink = squares / (squares + alpha)
        residual = outside + float((((1 - shrink)[:, None] * projected) ** 2).sum())
        freedom = len(x) - 1 - shrink.sum()  # the bias uses one degree of freedom
        errors.append(residual / freedom**2 if freedom > 0 else np.inf)
    return float(alphas[int(np.argmin(errors))])


def fit_map(x: np.ndarray, y: np.ndarray) -> LinearMap:
    """A ridge map from ``x`` to ``y`` with the penalty chosen by :func:`choose_alpha`."""
    return fit_ridge(x, y, choose_alpha(x, y))


def require_fittable(entries: int, counted: str) -> None:
    """Refuse a map that ``entries`` seen entries cannot fit (``counted`` says what was counted)."""
    if entries < MIN_FITTED:
        raise ConfigError(
            f"mapped needs at least {MIN_FITTED} entries seen in the corpus to fit its map, "
            f"{counted} {entries}; use --fill-unseen decontextualized",
            field="fill_unseen",
        )


def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean cosine between the rows of ``a`` and the rows of ``b``."""
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return float(np.mean(np.sum(a * b, axis=1) / np.maximum(norms, 1e-12)))


def held_out_split(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The held-out rows (:data:`HELD_OUT` of ``n``, at least one) and the rows fitted on."""
    order = np.random.default_rng(seed).permutation(n)
    n_test = max(1, round(HELD_OUT * n))
    return order[:n_test], order[n_test:]


def held_out_check(x: np.ndarray, y: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """Fit on 90% of the rows (fixed seed), compare on the other 10%.

    Returns the number of held-out rows and the mean cosine of their true ``y`` with the mapped
    ``x`` and with ``x`` itself (what ``decontextualized`` would fill with).
    """
    test, train = held_out_split(len(x), seed)
    mapping = fit_map(x[train], y[train])
    return {
        "entries": len(test),
        "mapped_cosine": round(mean_cosine(mapping(x[test]), y[test]), 4),
        "decontextualized_cosine": round(mean_cosine(x[test], y[test]), 4),
    }


def mapped_fill(
    seen_alone: np.ndarray, seen_contextual: np.ndarray, unseen_alone: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]]:
    """Map the unseen entries' decontextualized vectors into the contextual space.

    Args:
        seen_alone: Decontextualized vectors of the seen entries, ``[n, D]``.
        seen_contextual: Their context-averaged vectors, ``[n, D]``.
        unseen_alone: Decontextualized vectors of the entries to fill, ``[m, D]``.

    Returns:
        The filled vectors ``[m, D]`` and what to record in ``meta.json``: the method, the
        entries fitted on, the penalty and the :func:`held_out_check`.

    Raises:
        ConfigError: fewer than :data:`MIN_FITTED` seen entries to fit on.

    """
    require_fittable(len(seen_alone), "got")
    mapping = fit_map(seen_alone, seen_contextual)
    check = held_out_check(seen_alone, seen_contextual)
    record = {
        "method": "mapped",
        "fitted_on": len(seen_alone),
        "alpha": round(mapping.alpha, 6),
        "held_out": check,
    }
    return mapping(unseen_alone), record
