"""Ways to fill the entries the corpus never showed, on the quality benchmark (see quality.py).

One distillation pass (seen entries), one decontextualized pass per layer combination and one
pass of every entry in a few neutral carrier sentences; every fill method then works on those
vectors in memory. For each method: Spearman x 100 on SimLex-999 and WordSim-353 at full coverage
and over the pairs with a filled word alone, and the held-out cosine (fit on 90% of the seen
entries, fixed seed, mean cosine of filled and true context-averaged vectors on the other 10%).

Then what the target asks of the filled pairs: the score if the filled pairs were as good as the
seen ones, and the Spearman the filled pairs would need among themselves (see ``ceiling``).

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
from typing import Any

import numpy as np
from gensim_corpus import lee_documents, wiki_paragraphs
from quality import DATASETS, dataset_words, minilm_path
from scipy.stats import spearmanr

from roberta_static import DistillConfig, StaticVectors
from roberta_static.api import decontextualized, distill_from_model
from roberta_static.engine.stats import RunStats
from roberta_static.engine.step import add_batch
from roberta_static.model.encoder import Encoder
from roberta_static.model.loading import load_pretrained
from roberta_static.model.pooling import Accumulator
from roberta_static.quality.evaluate import dataset_path, find_key, read_pairs
from roberta_static.text.corpus import Corpus
from roberta_static.text.vocab import MatchedSentence, Vocabulary
from roberta_static.vectors.fill import (
    choose_alpha,
    fit_map,
    fit_ridge,
    held_out_split,
    mean_cosine,
)

CARRIERS = (
    "This is about {}.",
    "I want to talk about {}.",
    "We read about {} today.",
    "Here is a sentence with {} in it.",
    "He said {}.",
    "It was {}.",
    "They wrote the word {}.",
    "Something about {} was mentioned.",
)
"""Neutral sentences around each entry: a context that tells nothing about it (chosen before
looking at any score, and never changed)."""

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


def toward_identity(x: np.ndarray, y: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The input plus a GCV ridge map of what context adds: the penalty shrinks toward the
    identity instead of toward zero (both sides are the same model's layers; same width only)."""
    return query + fit_map(x, y - x)(query)


def blend(first: Fill, second: Fill, weight: float) -> Fill:
    """``weight`` of ``first``'s unit vectors plus the rest of ``second``'s."""

    def fill(x: np.ndarray, y: np.ndarray, query: np.ndarray) -> np.ndarray:
        a, b = unit_rows(first(x, y, query)), unit_rows(second(x, y, query))
        return weight * a + (1 - weight) * b

    return fill


def plain(x: np.ndarray, y: np.ndarray, query: np.ndarray) -> np.ndarray:
    return query  # decontextualized: the vector alone is the fill (same width only)


def in_carriers(
    model: object, tokenizer: object, vocab: Vocabulary, config: DistillConfig
) -> np.ndarray:
    """Each entry's vector in every :data:`CARRIERS` sentence, averaged over the sentences."""
    sentences = [
        MatchedSentence(
            carrier.format(entry), [(carrier.index("{}"), carrier.index("{}") + len(entry), row)]
        )
        for carrier in CARRIERS
        for row, entry in enumerate(vocab.entries)
    ]
    return average_in(Encoder(model, tokenizer, config), config, len(vocab), sentences)


def average_in(
    encoder: Encoder, config: DistillConfig, n_entries: int, sentences: list[MatchedSentence]
) -> np.ndarray:
    """Each entry's vector averaged over its occurrences in ``sentences`` (rows as spans say)."""
    accumulator = Accumulator(n_entries, encoder.output_dim(config.combine), encoder.device)
    for batch in encoder.batches(encoder.subwords.encode(sentences)):
        add_batch(encoder, batch, accumulator, config, RunStats())
    return accumulator.means()[0]


def distill_text(
    model: object, tokenizer: object, texts: list[str], vocab: Vocabulary, config: DistillConfig
) -> StaticVectors:
    """:func:`distill_from_model` over ``texts``, one per line of a temporary corpus file."""
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.txt"
        corpus_file.write_text("\n".join(texts) + "\n")
        return distill_from_model(model, tokenizer, Corpus([corpus_file]), vocab, config)


def spearman(sims: np.ndarray, humans: np.ndarray, rows: np.ndarray) -> float:
    """Spearman x 100 over the pairs of ``rows`` that have a cosine."""
    rows = rows & ~np.isnan(sims)
    return 100 * spearmanr(sims[rows], humans[rows]).statistic


def pair_cosines(vectors: StaticVectors, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Cosine (NaN where a word has no vector) and human score of every pair of a file."""
    kv = vectors.to_keyed_vectors()
    keys = [(find_key(kv, a, True), find_key(kv, b, True), s) for a, b, s in read_pairs(path)]
    sims = [kv.similarity(a, b) if a and b else np.nan for a, b, _ in keys]
    return np.array(sims, dtype=np.float64), np.array([s for *_, s in keys])


def ceiling(cosines: np.ndarray, humans: np.ndarray, filled: np.ndarray) -> list[str]:
    """What full coverage could reach, keeping the seen pairs' cosines and replacing the others.

    "As good as seen": each filled pair takes the cosine of a seen pair of about the same human
    score (one of the 10 nearest, at random), 300 draws. "Calibrated, noisy": the filled pairs
    take the seen pairs' cosines at their human scores' quantiles, reordered by the human score
    plus Gaussian noise; the noise sets how well they correlate among themselves.
    """
    rng = np.random.default_rng(0)
    seen = np.flatnonzero(~filled)
    nearest = [
        seen[np.argsort(np.abs(humans[seen] - humans[i]))[:10]] for i in np.flatnonzero(filled)
    ]
    draws = []
    for _ in range(300):
        trial = cosines.copy()
        trial[filled] = cosines[[rng.choice(n) for n in nearest]]
        draws.append(100 * spearmanr(trial, humans).statistic)
    lines = [f"  as good as seen pairs: {np.mean(draws):.1f} (sd {np.std(draws):.1f})"]
    human = humans[filled]
    quantiles = np.interp(human, np.sort(humans[seen]), np.linspace(0, 1, len(seen)))
    levels = np.quantile(cosines[seen], np.sort(quantiles))
    for noise in (0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8):
        full, among = [], []
        for _ in range(100):
            trial = cosines.copy()
            order = (human - human.mean()) / human.std() + noise * rng.normal(size=len(human))
            trial[filled] = levels[np.argsort(np.argsort(order))]
            full.append(100 * spearmanr(trial, humans).statistic)
            among.append(100 * spearmanr(trial[filled], human).statistic)
        lines.append(
            f"  calibrated, noisy: filled pairs {np.mean(among):.1f} -> full {np.mean(full):.1f}"
        )
    return lines


def held_out(fill: Fill, x: np.ndarray, y: np.ndarray) -> float:
    test, train = held_out_split(len(x))
    return mean_cosine(fill(x[train], y[train], x[test]), y[test])


def start_benchmark(description: str) -> tuple[Vocabulary, DistillConfig, Any, Any]:
    """Parse ``--model``, print the machine, load the encoder; the benchmark's vocabulary."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default=None, help="encoder (default: the offline MiniLM)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.python_version()}")
    config = DistillConfig(model=args.model or minilm_path())
    model, tokenizer = load_pretrained(config)
    return Vocabulary.from_entries(dataset_words()), config, model, tokenizer


def main() -> None:
    started = time.perf_counter()
    vocab, config, model, tokenizer = start_benchmark(__doc__.splitlines()[0])
    seen = distill_text(model, tokenizer, [*wiki_paragraphs(), *lee_documents()], vocab, config)
    alone = decontextualized(model, tokenizer, vocab, config)
    every_layer = decontextualized(model, tokenizer, vocab, replace(config, combine="concat"))
    carried = StaticVectors(
        list(vocab.entries),
        in_carriers(model, tokenizer, vocab, config),
        np.zeros(len(vocab), dtype=np.int64),
    )
    print(f"encoder: {config.model}; layers {config.layers}, pool {config.pool}")
    print(
        f"distillation, decontextualized and carrier passes {time.perf_counter() - started:.0f} s"
    )

    report(seen, alone, every_layer, carried)
    print(f"total {time.perf_counter() - started:.0f} s")


def report(
    seen: StaticVectors, alone: StaticVectors, every_layer: StaticVectors, carried: StaticVectors
) -> None:
    """Fill the unseen entries every way from the passes' vectors, and print the scores."""
    inputs = {
        "alone": alone,
        "alone, every layer concatenated": every_layer,
        "in carrier sentences": carried,
    }
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
        "in carrier sentences, unmapped": ("in carrier sentences", plain),
        "ridge from carrier sentences, GCV": ("in carrier sentences", ridge(None)),
        "ridge toward the identity (residual map, its own penalty)": ("alone", toward_identity),
        "ridge toward the identity from carrier sentences": (
            "in carrier sentences",
            toward_identity,
        ),
    }
    paths = {d: dataset_path(d)[1] for d in DATASETS}
    seen_kv = seen.to_keyed_vectors()
    filled_pairs = {
        d: np.array(
            [
                not (find_key(seen_kv, a, True) and find_key(seen_kv, b, True))
                for a, b, _ in read_pairs(p)
            ]
        )
        for d, p in paths.items()
    }
    for d, mask in filled_pairs.items():
        print(f"{d}: {mask.sum()} of {len(mask)} pairs have a filled word")
    header = f"{'method':55}" + "".join(f"{d + ' ρ':>15}{'filled pairs':>14}" for d in DATASETS)
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
    # Not fills: every entry, seen ones too, from one source; on the filled pairs, how much the
    # model knows about the words the corpus lacks.
    rows += [("(every entry alone)", alone, None, None)]
    rows += [("(every entry in carrier sentences)", carried, None, None)]
    cosines = {}
    for name, vectors, cosine, alpha in rows:
        row = f"{name:55}"
        for d in DATASETS:
            sims, humans = pair_cosines(vectors, paths[d])
            cosines[name, d] = sims, humans
            among = filled_pairs[d] & ~np.isnan(sims)
            row += f"{spearman(sims, humans, np.ones(len(sims), bool)):>15.1f}"
            row += f"{spearman(sims, humans, among):>14.1f}" if among.any() else f"{'':>14}"
        row += f"{cosine:>14.3f}" if cosine is not None else f"{'':>14}"
        row += f"{alpha:>10.3g}" if alpha is not None else ""
        print(row)
    print("What full coverage could reach, the seen pairs kept as they are:")
    for d in DATASETS:
        print(d)
        sims, humans = cosines["mapped: ridge, penalty by GCV (--fill-unseen mapped)", d]
        print("\n".join(ceiling(sims, humans, filled_pairs[d])))


if __name__ == "__main__":
    main()
