"""Ways to fill the entries the corpus never showed, on the quality benchmark (see quality.py).

One distillation pass (seen entries) and one decontextualized pass per layer combination; every
fill method then works on those vectors in memory. For each method: Spearman x 100 on SimLex-999
and WordSim-353 at full coverage, and the held-out cosine (fit on 90% of the seen entries, fixed
seed, mean cosine of filled and true context-averaged vectors on the other 10%).

Usage: python benchmarks/fill_variants.py [--model PATH]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
from gensim_corpus import lee_documents, wiki_paragraphs
from quality import DATASETS, dataset_words, minilm_path

from roberta_static import DistillConfig, StaticVectors
from roberta_static.corpus import Corpus
from roberta_static.encoder import load_pretrained
from roberta_static.evaluate import dataset_path, evaluate_pairs
from roberta_static.fill import HELD_OUT, choose_alpha, fit_map, fit_ridge, mean_cosine
from roberta_static.pipeline import decontextualized, distill_from_model
from roberta_static.vocab import Vocabulary

# fill(seen inputs, their context-averaged vectors, inputs of the entries to fill) -> vectors
Fill = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def nearest_mean(k: int) -> Fill:
    """Mean context-averaged vector of the k seen entries nearest in the decontextualized space."""

    def fill(x: np.ndarray, y: np.ndarray, query: np.ndarray) -> np.ndarray:
        near = np.argsort(-(unit_rows(query) @ unit_rows(x).T), axis=1)[:, :k]
        return y[near].mean(axis=1)

    return fill


def ridge(relative_alpha: float | None) -> Fill:
    """Ridge map; ``None`` chooses the penalty by GCV (what ``--fill-unseen mapped`` does)."""

    def fill(x: np.ndarray, y: np.ndarray, query: np.ndarray) -> np.ndarray:
        if relative_alpha is None:
            return fit_map(x, y)(query)
        scale = (np.linalg.svd(x - x.mean(0), compute_uv=False) ** 2).mean()
        return fit_ridge(x, y, relative_alpha * scale)(query)

    return fill


def blend(first: Fill, second: Fill, weight: float) -> Fill:
    """``weight`` of ``first``'s unit vectors plus the rest of ``second``'s."""

    def fill(x: np.ndarray, y: np.ndarray, query: np.ndarray) -> np.ndarray:
        a, b = unit_rows(first(x, y, query)), unit_rows(second(x, y, query))
        return weight * a + (1 - weight) * b

    return fill


def plain(x: np.ndarray, y: np.ndarray, query: np.ndarray) -> np.ndarray:
    return query  # decontextualized: the vector alone is the fill (same width only)


def held_out(fill: Fill, x: np.ndarray, y: np.ndarray) -> float:
    order = np.random.default_rng(0).permutation(len(x))
    n_test = max(1, round(HELD_OUT * len(x)))
    test, train = order[:n_test], order[n_test:]
    return mean_cosine(fill(x[train], y[train], x[test]), y[test])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="encoder (default: the offline MiniLM)")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"machine: {platform.machine()}, {platform.python_version()}")
    vocab = Vocabulary.from_entries(dataset_words())
    config = DistillConfig(model=args.model or minilm_path())
    model, tokenizer = load_pretrained(config)
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.txt"
        corpus_file.write_text("\n".join([*wiki_paragraphs(), *lee_documents()]) + "\n")
        seen = distill_from_model(model, tokenizer, Corpus([corpus_file]), vocab, config)
    alone = decontextualized(model, tokenizer, vocab, config)
    every_layer = decontextualized(model, tokenizer, vocab, replace(config, combine="concat"))
    print(f"encoder: {config.model}; layers {config.layers}, pool {config.pool}")
    print(f"distillation + decontextualized passes {time.perf_counter() - started:.0f} s")

    inputs = {"alone": alone, "alone, every layer concatenated": every_layer}
    fitted = [w for w in seen.words if w in alone and w in every_layer]
    unseen = [w for w in alone.words if w not in seen]
    y = seen[fitted].astype(np.float64)
    print(f"seen {len(seen)}, fitted on {len(fitted)}, filled {len(unseen)}")
    methods: dict[str, tuple[str, Fill]] = {
        "decontextualized": ("alone", plain),
        "mapped: ridge, penalty by GCV (--fill-unseen mapped)": ("alone", ridge(None)),
        **{f"ridge, penalty {a:g} x mean s^2": ("alone", ridge(a)) for a in (1e-3, 1e-2, 1e-1)},
        "ridge from every layer concatenated, GCV": (
            "alone, every layer concatenated",
            ridge(None),
        ),
        "5 nearest seen entries, mean": ("alone", nearest_mean(5)),
        "20 nearest seen entries, mean": ("alone", nearest_mean(20)),
        "blend 0.5 mapped + 0.5 decontextualized": ("alone", blend(ridge(None), plain, 0.5)),
        "blend 0.5 mapped + 0.5 (5 nearest)": ("alone", blend(ridge(None), nearest_mean(5), 0.5)),
    }
    paths = {d: dataset_path(d)[1] for d in DATASETS}
    header = f"{'method':55}" + "".join(f"{d + ' ρ':>15}{'cov %':>7}" for d in DATASETS)
    print(header + f"{'held-out cos':>14}{'alpha':>10}")
    rows = [("none (seen only)", seen, None, None)]
    for name, (source, fill) in methods.items():
        x = inputs[source][fitted].astype(np.float64)
        filled = fill(x, y, inputs[source][unseen].astype(np.float64))
        alpha = choose_alpha(x, y) if "GCV" in name else None
        vectors = StaticVectors(
            [*seen.words, *unseen],
            np.vstack([seen.vectors, filled]),
            np.concatenate([seen.counts, np.zeros(len(unseen), dtype=np.int64)]),
            seen.meta,
        )
        rows.append((name, vectors, held_out(fill, x, y), alpha))
    for name, vectors, cosine, alpha in rows:
        kv = vectors.to_keyed_vectors()
        row = f"{name:55}"
        for d in DATASETS:
            s = evaluate_pairs(kv, paths[d], True, d)
            row += f"{s.spearman:>15.1f}{s.coverage:>7.1f}"
        row += f"{cosine:>14.3f}" if cosine is not None else f"{'':>14}"
        row += f"{alpha:>10.3g}" if alpha is not None else ""
        print(row)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
