"""tune's design choices, measured: held-out fit, Lee document similarity and sentiment per variant.

The targets are ``distill``'s own (``--sentence-targets``): MiniLM's sentence vectors of the
sentences the pass encodes, with their entries, over gensim's Lee corpus (background plus the 50
documents, as ``doc_similarity.py`` reads it), every word, ``max_contexts=0``; and with
``--sentiment-data`` over the movie-review snippets ``sentiment.py`` reads, the same way. Both
folders are those ``doc_similarity.py`` and ``sentiment.py`` make (``teacher_rows.with_targets``),
cached under ``--work``.

Each variant tunes from the same vectors and targets and is scored by its held-out cosine to the
teacher (Lee's targets), by the Pearson of spaCy ``doc.similarity`` (the component, ``doc_vector``
``weighted``) with the human judgements of Lee's 1,225 pairs, and, with the snippets, by the
Pearson of ``sentiment.py``'s cross-validated ridge regression of valence on spaCy ``doc.vector``
(``mean`` and ``weighted``), tuned on the snippets' own targets. The variants are ``tune``'s
defaults over three seeds, the head dropped rather than folded (tokenlearn's), other step sizes,
and the choices tokenlearn makes otherwise (a randomly initialised head, MSE, targets reduced by
PCA to 256 dimensions), with other starts.

With ``--tokenlearn-python`` (see ``teacher_rows.py``), model2vec + tokenlearn trained on the
same sentences with the same teacher is scored too, through its own ``StaticModel.encode``.

Usage: python benchmarks/tune_choices.py --work DIR [--model PATH] [--sentiment-data DIR]
       [--tokenlearn-python PYTHON]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import platform
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import torch
from doc_similarity import (
    PAIRS,
    SpacyDocs,
    correlations,
    digest,
    model2vec_embed,
    pair_cosines,
    read_lee,
)
from gensim.test.utils import datapath
from quality import minilm_path
from sentiment import SNIPPETS, SOURCE, cross_validated, read_snippets, scores
from teacher_rows import tokenlearn_model, with_targets

from roberta_static import StaticVectors
from roberta_static.tuning import training
from roberta_static.tuning.config import TuneConfig
from roberta_static.tuning.run import tune
from roberta_static.vectors.target_files import write_targets
from roberta_static.vectors.targets import SentenceTargets


@contextlib.contextmanager
def random_head() -> Iterator[None]:
    """tokenlearn's start: the head as torch initialises it, no least-squares fit."""
    with mock.patch.object(training, "_least_squares_head", lambda *args: None):
        yield


def pca_targets(folder: Path, out: Path, dims: int) -> Path:
    """A copy of ``folder`` whose targets are reduced to ``dims`` dimensions by PCA (tokenlearn)."""
    from roberta_static.vectors.target_files import read_targets

    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(folder, out)
    words = StaticVectors.load(folder).words
    targets = read_targets(folder, words)
    centered = targets.vectors - targets.vectors.mean(axis=0)
    _, _, axes = np.linalg.svd(centered, full_matrices=False)
    reduced = SentenceTargets.of_sorted(
        targets.limit, targets.pooling, targets.offered, targets.keys,
        (centered @ axes[:dims].T).astype(np.float32), targets.indptr, targets.entries,
        targets.counts,
    )  # fmt: skip
    shutil.rmtree(out / "targets")
    write_targets(reduced, out, words)
    return out


def variants(default: TuneConfig) -> dict[str, tuple[TuneConfig, Callable[[], Any], bool]]:
    """Label -> (options, context to tune in, targets reduced by PCA)."""
    plain = contextlib.nullcontext
    mse = dataclasses.replace(default, loss="mse", learning_rate=1e-3)
    tokenlearns = dataclasses.replace(mse, head="drop")
    steps = [rate for rate in (3e-3, 1e-3, 3e-4) if rate != default.learning_rate]
    return {
        **{
            f"ours, seed {seed}": (dataclasses.replace(default, seed=seed), plain, False)
            for seed in range(3)
        },
        **{
            f"head dropped, seed {seed}": (
                dataclasses.replace(default, seed=seed, head="drop"),
                plain,
                False,
            )
            for seed in range(3)
        },
        **{
            f"step {rate:g}": (dataclasses.replace(default, learning_rate=rate), plain, False)
            for rate in steps
        },
        "random head": (default, random_head, False),
        "MSE, step 1e-3": (mse, plain, False),
        "MSE, step 1e-3, random head, dropped (tokenlearn's)": (tokenlearns, random_head, False),
        "the same, targets PCA 256 (tokenlearn's)": (tokenlearns, random_head, True),
        "start: SIF 1e-3 weights": (
            dataclasses.replace(default, sif_coefficient=1e-3),
            plain,
            False,
        ),
        "start: top 4 components removed": (
            dataclasses.replace(default, remove_top_pcs=4),
            plain,
            False,
        ),
        "start: both (what doc_vector weighted computes)": (
            dataclasses.replace(default, remove_top_pcs=4, sif_coefficient=1e-3),
            plain,
            False,
        ),
    }


class Scores:
    """Lee's Pearson through spaCy ``doc.similarity`` and, with the snippets, sentiment's."""

    def __init__(self, snippets: list[str] | None, valence: np.ndarray | None) -> None:
        self.docs = read_lee("lee.cor")
        self.human = np.loadtxt(datapath("similarities0-1.txt"))[PAIRS]
        self.snippets, self.valence = snippets, valence
        self.spacy_args = argparse.Namespace(remove_top_pcs=4, sif=1e-3)

    def lee(self, folder: Path) -> float:
        """Pearson of ``doc_vector`` ``weighted`` similarities with the human judgements."""
        docs = SpacyDocs(folder, "weighted", self.spacy_args)
        return correlations(docs.similarities(self.docs), self.human)[0]

    def sentiment(self, folder: Path) -> str:
        """``sentiment.py``'s Pearson for spaCy ``doc.vector``, ``mean`` then ``weighted``."""
        pearsons = []
        for mode in ("mean", "weighted"):
            x = np.asarray(SpacyDocs(folder, mode, self.spacy_args)(self.snippets), np.float64)
            pearsons.append(scores(cross_validated(x, self.valence)[0], self.valence)[0])
        return "  {:.3f}  {:.3f}".format(*pearsons)


def tuned_row(label: str, record: dict[str, Any], lee: float) -> str:
    """The variant's held-out cosine, epochs (best), seconds and Lee Pearson."""
    cosine, epochs = record["held_out_cosine"], f"{record['epochs']} ({record['best_epoch']})"
    return (
        f"{label:52}{cosine['start']:>8.3f} -> {cosine['best']:<6.3f}{epochs:>10}"
        f"{record['seconds']:>5.0f}{lee:>7.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for vectors and runs")
    parser.add_argument("--model", default=None, help="teacher (default: the offline MiniLM)")
    parser.add_argument("--sentiment-data", type=Path, default=None, help=f"extracted {SOURCE}")
    parser.add_argument("--tokenlearn-python", type=Path, default=None, help="tokenlearn's Python")
    args = parser.parse_args()
    model = args.model or minilm_path()
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}"
    )
    texts = read_lee("lee_background.cor") + read_lee("lee.cor")
    key = digest(model, texts)  # doc_similarity.py's: the two share their cache in one --work
    sources = {"lee": with_targets(texts, model, args.work, key)}
    snippets, valence = (
        read_snippets(args.sentiment_data / SNIPPETS) if args.sentiment_data else (None, None)
    )
    if snippets:
        sources["sentiment"] = with_targets(snippets, model, args.work, digest(model, snippets))
    measure = Scores(snippets, valence)
    sentiment = "  sentiment: mean, weighted" if snippets else ""
    print(f"\n{'variant':52}{'held-out cosine':>18}{'epochs':>10}{'s':>5}{'Lee':>7}{sentiment}")
    untuned = f"{'untuned, doc_vector weighted':52}{'':>33}{measure.lee(sources['lee']):>7.3f}"
    print(untuned + (measure.sentiment(sources["sentiment"]) if snippets else ""))
    for label, (config, context, reduced) in variants(TuneConfig(device="cpu")).items():
        row = ""
        for name, source in sources.items():
            if reduced:
                source = pca_targets(source, args.work / "pca", 256)
            out = args.work / f"tuned-{name}"
            with context():
                record = tune(source, out, config, overwrite=True).meta["tune"]
            shutil.rmtree(args.work / "pca", ignore_errors=True)
            row += (
                tuned_row(label, record, measure.lee(out))
                if name == "lee"
                else measure.sentiment(out)
            )
        print(row, flush=True)
    trained = tokenlearn_model(texts, model, args.work, key, args.tokenlearn_python)
    if trained is not None:
        score = correlations(pair_cosines(model2vec_embed(trained)(measure.docs)), measure.human)[0]
        print(f"{'model2vec + tokenlearn 0.2.1, same sentences':52}{'':>33}{score:>7.3f}")


if __name__ == "__main__":
    main()
