"""tune's design choices, measured: held-out loss and Lee document similarity per variant.

The targets are ``distill``'s own (``--sentence-targets``): MiniLM's sentence vectors of a
sample of the sentences the pass encodes, with their entries. The text is gensim's Lee corpus,
background plus the 50 documents, as ``doc_similarity.py`` reads it; vectors are distilled over
it with the offline all-MiniLM-L6-v2, every word, ``max_contexts=0``.

Each variant tunes from the same vectors and targets and is scored by its held-out loss and
cosine to the teacher, and by the Pearson of spaCy ``doc.similarity`` (the component,
``doc_vector`` ``weighted``) with the human judgements of the 50 documents' 1,225 pairs. The
variants are ``tune``'s defaults (cosine loss, step 3e-3, the head starting as the
least-squares fit, the start's top 4 components removed and SIF 1e-3 weights) over three seeds,
and the choices tokenlearn makes otherwise (a randomly initialised head, MSE, step 1e-3, targets
reduced by PCA to 256 dimensions), with other step sizes and starts.

With ``--tokenlearn-python`` (see ``teacher_rows.py``), model2vec + tokenlearn trained on the
same sentences with the same teacher is scored too, through its own ``StaticModel.encode``.

Usage: python benchmarks/tune_choices.py --work DIR [--model PATH] [--limit 200000]
       [--tokenlearn-python PYTHON]
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from doc_similarity import PAIRS, SpacyDocs, correlations, model2vec_embed, pair_cosines, read_lee
from gensim.test.utils import datapath
from quality import minilm_path
from teacher_rows import tokenlearn_model

from roberta_static import DistillConfig, StaticVectors, distill
from roberta_static.tuning import training
from roberta_static.tuning.config import TuneConfig
from roberta_static.tuning.run import tune
from roberta_static.vectors.target_files import has_targets, write_targets
from roberta_static.vectors.targets import SentenceTargets


@contextlib.contextmanager
def random_head() -> Iterator[None]:
    """tokenlearn's start: the head as torch initialises it, no least-squares fit."""
    with mock.patch.object(training, "_least_squares_head", lambda *args: None):
        yield


@contextlib.contextmanager
def weights_of_one() -> Iterator[None]:
    """Every entry's weight starts at 1 (no SIF)."""
    real = training.train

    def train(vectors, weights, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        return real(vectors, np.ones_like(weights), *args, **kwargs)

    with mock.patch("roberta_static.tuning.training.train", train):
        yield


def pca_targets(folder: Path, out: Path, dims: int) -> Path:
    """A copy of ``folder`` whose targets are reduced to ``dims`` dimensions by PCA (tokenlearn)."""
    from roberta_static.vectors.target_files import read_targets

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for vectors and runs")
    parser.add_argument("--model", default=None, help="teacher (default: the offline MiniLM)")
    parser.add_argument("--limit", type=int, default=200_000, help="sentence targets kept")
    parser.add_argument("--tokenlearn-python", type=Path, default=None, help="tokenlearn's Python")
    args = parser.parse_args()
    model = args.model or minilm_path()
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}"
    )
    docs, background = read_lee("lee.cor"), read_lee("lee_background.cor")
    human = np.loadtxt(datapath("similarities0-1.txt"))[PAIRS]
    texts = background + docs
    folder = args.work / "vectors"
    if not has_targets(folder):
        tick = time.perf_counter()
        config = DistillConfig(
            model=model, min_count=1, max_contexts=0, device="cpu", sentence_targets=args.limit
        )
        vectors = distill(texts=texts, config=config)
        print(f"distill keeping targets: {time.perf_counter() - tick:.0f} s")
        shutil.rmtree(folder, ignore_errors=True)
        vectors.save(folder)
    spacy_args = argparse.Namespace(remove_top_pcs=4, sif=1e-3)
    pearson = correlations(SpacyDocs(folder, "weighted", spacy_args).similarities(docs), human)[0]
    print(f"\n{'variant':44}{'held-out loss':>22}{'cosine':>16}{'epochs':>8}{'s':>6}{'Lee':>7}")
    print(f"{'untuned, doc_vector weighted':44}{'':>22}{'':>16}{'':>8}{'':>6}{pearson:>7.3f}")
    plain, mse = contextlib.nullcontext, TuneConfig(loss="mse", learning_rate=1e-3)
    variants = {
        **{f"ours, seed {seed}": (TuneConfig(seed=seed), plain, folder) for seed in range(3)},
        **{
            f"cosine, random head, 1e-3, seed {seed}": (
                TuneConfig(learning_rate=1e-3, seed=seed),
                random_head,
                folder,
            )
            for seed in range(3)
        },
        "cosine, random head, 3e-3": (TuneConfig(), random_head, folder),
        "cosine, 1e-3": (TuneConfig(learning_rate=1e-3), plain, folder),
        "cosine, 1e-3, batch 64": (TuneConfig(learning_rate=1e-3, batch_size=64), plain, folder),
        "mse, 1e-3 (tokenlearn's loss and step)": (mse, plain, folder),
        "mse, 1e-3, random head (tokenlearn's)": (mse, random_head, folder),
        "mse, 1e-3, targets PCA 256 (tokenlearn's)": (mse, plain, None),
        "mse, 3e-3": (TuneConfig(loss="mse"), plain, folder),
        "mse, 1e-2": (TuneConfig(loss="mse", learning_rate=1e-2), plain, folder),
        "mse, 1e-4": (TuneConfig(loss="mse", learning_rate=1e-4), plain, folder),
        "mse, 1e-3, no components removed (D=0)": (
            TuneConfig(loss="mse", learning_rate=1e-3, remove_top_pcs=0),
            plain,
            folder,
        ),
        "mse, 1e-3, weights start at 1": (mse, weights_of_one, folder),
    }
    for number, (label, (config, context, source)) in enumerate(variants.items()):
        source = source or pca_targets(folder, args.work / "pca", 256)
        out = args.work / f"tuned-{number}"
        with context():
            tuned = tune(source, out, config, overwrite=True)
        record = tuned.meta["tune"]
        loss, cosine = record["held_out_loss"], record["held_out_cosine"]
        score = correlations(SpacyDocs(out, "weighted", spacy_args).similarities(docs), human)[0]
        print(
            f"{label:44}{loss['start']:>10.3g} -> {loss['best']:<8.3g}"
            f"{cosine['start']:>7.3f} -> {cosine['best']:<5.3f}{record['epochs']:>6}"
            f"{record['seconds']:>7.0f}{score:>7.3f}"
        )
        shutil.rmtree(args.work / "pca", ignore_errors=True)
    trained = tokenlearn_model(texts, model, args.work, "lee", args.tokenlearn_python)
    if trained is not None:
        score = correlations(pair_cosines(model2vec_embed(trained)(docs)), human)[0]
        print(f"{'model2vec + tokenlearn 0.2.1, same sentences':44}{'':>52}{score:>7.3f}")


if __name__ == "__main__":
    main()
