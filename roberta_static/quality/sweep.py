"""Layer sweep: one pass keeping every hidden layer, then scores per layer and range of layers.

Every layer's pooled vectors are accumulated side by side (``combine="concat"`` over all layers),
so each single layer, and the mean over any range of layers, is a slice or a mean of slices of one
result: pooling and averaging over occurrences are linear in the layers they combine.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..config import ALL_LAYERS, DistillConfig
from ..outputs import CSV_FILE as CSV_FILE
from ..outputs import CSV_HEADER
from ..outputs import PLOT_FILE as PLOT_FILE
from ..outputs import sweep_folder_entries as sweep_folder_entries
from ..vectors.postprocess import PostProcessing, anisotropy
from ..vectors.static import StaticVectors
from .evaluate import PairScores, dataset_path, evaluate_pairs

if TYPE_CHECKING:
    from ..progress import ProgressCallback
    from ..text.vocab import Vocabulary


@dataclass(frozen=True)
class Candidate:
    """A way to build static vectors from the layers: ``mean`` or ``concat`` over ``layers``."""

    layers: tuple[int, ...]
    combine: str = "mean"

    @property
    def label(self) -> str:
        """``layer 3``, ``mean 1-4`` or ``concat 1-4``."""
        if len(self.layers) == 1:
            return f"layer {self.layers[0]}"
        return f"{self.combine} {self.layers[0]}-{self.layers[-1]}"


@dataclass
class SweepResult:
    """Scores of one candidate under one post-processing, per dataset."""

    candidate: Candidate
    postprocessing: str
    anisotropy: float
    scores: dict[str, PairScores] = field(default_factory=dict)


def candidates(num_layers: int) -> list[Candidate]:
    """Every single layer, every range of 2 to 4 consecutive layers, and all layers."""
    found = [Candidate((layer,)) for layer in range(num_layers + 1)]
    for size in (2, 3, 4):
        found += [Candidate(tuple(range(s, s + size))) for s in range(0, num_layers + 2 - size)]
    found.append(Candidate(tuple(range(num_layers + 1))))
    return found


def postprocessings(hidden_size: int) -> dict[str, PostProcessing]:
    """None, centering, and all-but-the-top with D = hidden / 100 (the paper's rule of thumb)."""
    top = max(1, round(hidden_size / 100))
    return {
        "none": PostProcessing(),
        "center": PostProcessing(center=True),
        f"remove-top-{top}": PostProcessing(remove_top_pcs=top),
    }


def layer_matrix(all_layers: StaticVectors, hidden_size: int, candidate: Candidate) -> np.ndarray:
    """The vectors of ``candidate`` from a concat-over-all-layers result."""
    width = hidden_size
    blocks = [all_layers.vectors[:, i * width : (i + 1) * width] for i in candidate.layers]
    if candidate.combine == "concat":
        return np.concatenate(blocks, axis=1)
    return np.mean(blocks, axis=0)


def score(
    all_layers: StaticVectors, hidden_size: int, datasets: Iterable[str]
) -> list[SweepResult]:
    """Score every candidate under every post-processing on each dataset."""
    num_layers = all_layers.dim // hidden_size - 1
    resolved = [dataset_path(d) for d in datasets]
    lower = all_layers.case == "lower"
    results = []
    for candidate in candidates(num_layers):
        matrix = layer_matrix(all_layers, hidden_size, candidate)
        for label, steps in postprocessings(hidden_size).items():
            processed = steps.apply(matrix)
            kv = StaticVectors(all_layers.words, processed, all_layers.counts).to_keyed_vectors()
            result = SweepResult(candidate, label, anisotropy(processed))
            for name, path in resolved:
                result.scores[name] = evaluate_pairs(kv, path, lower, name)
            results.append(result)
    return results


def run_sweep(
    corpus: str | os.PathLike | Iterable[str | os.PathLike],
    vocab: str | os.PathLike | Vocabulary | None,
    config: DistillConfig,
    datasets: Iterable[str],
    progress: ProgressCallback | None = None,
) -> list[SweepResult]:
    """Distill once keeping every layer, then score every candidate (see :func:`score`).

    ``config.layers``, ``combine`` and the post-processing options are ignored: the sweep covers
    them.
    """
    from ..api import distill

    datasets = list(datasets)
    for name in datasets:
        dataset_path(name)  # fail on a bad dataset before the long pass
    one_pass = config.replace(
        layers=ALL_LAYERS,
        combine="concat",
        center=False,
        remove_top_pcs=0,
        pca=None,
        normalize=False,
    )
    all_layers = distill(corpus, vocab, one_pass, progress)
    return score(all_layers, all_layers.meta["model"]["hidden_size"], datasets)


def write_csv(results: list[SweepResult], path: str | os.PathLike) -> None:
    """One row per candidate, post-processing and dataset."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_HEADER)
        for result in results:
            for name, scores in result.scores.items():
                writer.writerow(
                    [
                        result.candidate.label,
                        " ".join(map(str, result.candidate.layers)),
                        result.postprocessing,
                        f"{result.anisotropy:.3f}",
                        name,
                        _score_cell(scores.spearman),
                        _score_cell(scores.pearson),
                        scores.covered,
                        scores.pairs,
                    ]
                )


def _score_cell(score: float) -> str:
    """A score for the CSV; empty where there is none (no covered pair), never ``nan``."""
    return f"{score:.2f}" if np.isfinite(score) else ""


def plot(results: list[SweepResult], path: str | os.PathLike) -> None:
    """Spearman x 100 against the layer, one line per dataset and post-processing."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    singles = [r for r in results if len(r.candidate.layers) == 1]
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for postprocessing in dict.fromkeys(r.postprocessing for r in singles):
        rows = [r for r in singles if r.postprocessing == postprocessing]
        for name in rows[0].scores:
            axes.plot(
                [r.candidate.layers[0] for r in rows],
                [r.scores[name].spearman for r in rows],
                marker="o",
                linestyle="-" if postprocessing == "none" else "--",
                label=f"{name} ({postprocessing})",
            )
    axes.set_xlabel("layer (0 = embeddings)")
    axes.set_ylabel("Spearman x 100")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(Path(path), dpi=120)
    pyplot.close(figure)
