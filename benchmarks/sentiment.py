"""Sentiment: ridge regression of human valence on one vector per movie-review snippet.

Data: VADER's human-rated snippets (Hutto & Gilbert, ICWSM 2014), in the public repository
``cjhutto/vaderSentiment``, file ``additional_resources/hutto_ICWSM_2014.tar.gz``; ``--data`` is
the extracted folder, which holds ``movieReviewSnippets_GroundTruth.txt`` (10,605 sentences of
Pang & Lee's, ``id<TAB>valence<TAB>text``, the raters' mean valence in [-4, 4]).

Every text becomes one vector; ridge regression, 5-fold cross-validation with fixed folds, the
regularisation chosen by a 5-fold cross-validation inside each training fold (numpy, closed form
through the SVD). Scores over the out-of-fold predictions of all texts: Pearson with the human
valence, and sign accuracy on the texts with |valence| >= 0.5. Embedding times are the better of
two runs over all texts, models already loaded (the first run also fills what a method caches as
it meets words: spaCy's vocabulary of lexemes, torch's kernels), as ``doc_similarity.py`` takes
the best of its runs.

Rows (every method sees the snippets; distillation as ``doc_similarity.py``: vocabulary built from
the text, ``min_count=1``, ``max_contexts=0``):
- ours over the snippets, and over the snippets plus the Wikipedia + Lee text of the other
  benchmarks; each through spaCy ``doc.vector`` (the ``roberta_static`` component), the model2vec
  export plain, and with all-but-the-top and SIF (the options that won the Lee benchmark);
- ours from MiniLM fine-tuned on the snippets (``finetune`` with a new masked-LM head, since
  MiniLM ships none: 60 steps of 8 blocks of 128 tokens by default, about 8 minutes on 2 cores);
- the decontextualized baseline (each snippet word alone through the model, our counts for SIF);
- gensim Word2Vec as ``doc_similarity.py`` trains it (skip-gram, 100 dimensions, 100 epochs), on
  each of the two texts;
- MiniLM itself as a sentence encoder (sentence-transformers: mean pooling, as its model card);
- ours tuned on MiniLM's own sentence vectors of the snippets (``distill`` keeping sentence
  targets, then ``tune``), through spaCy ``doc.vector`` (``doc_vector`` weighted: the learned
  weights) and the model2vec export; and model2vec + tokenlearn trained on the snippets with
  MiniLM as teacher (see ``teacher_rows.py`` for both, and when they are skipped).

Distilled vectors, the fine-tuned model and Word2Vec are cached under ``--work``, keyed by their
inputs and options, so a rerun only embeds and scores.

Usage: python benchmarks/sentiment.py --data DIR --work DIR [--model PATH] [--finetune-steps 60]
       [--tokenlearn-python PYTHON]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path

import numpy as np
from doc_similarity import (
    SpacyDocs,
    digest,
    model2vec_embed,
    saved,
    st_embed,
    timed,
    with_counts_of,
    word2vec_vectors,
)
from gensim_corpus import lee_documents, wiki_paragraphs
from quality import minilm_path
from teacher_rows import tokenlearn_model, tuned_vectors

from roberta_static import DistillConfig, StaticVectors, distill
from roberta_static.api import decontextualized
from roberta_static.finetune.config import FinetuneConfig
from roberta_static.finetune.run import FINETUNE_FILE, finetune
from roberta_static.model.loading import load_pretrained
from roberta_static.text.vocab import Vocabulary
from roberta_static.vectors.postprocess import PostProcessing, postprocess

SNIPPETS = "movieReviewSnippets_GroundTruth.txt"
SOURCE = "cjhutto/vaderSentiment, additional_resources/hutto_ICWSM_2014.tar.gz"
FOLDS = 5
SIGN_THRESHOLD = 0.5
# Ridge penalties, relative to the training fold's mean squared feature norm per dimension, so one
# grid fits vectors of any scale.
RELATIVE_ALPHAS = np.logspace(-4, 2, 13)
Embed = Callable[[list[str]], np.ndarray]
# spaCy rows: label -> the component's settings besides ``vectors``.
DOC_VECTORS = ("mean", "weighted")  # the spaCy component's doc_vector settings


class DataError(ValueError):
    """The snippets file is missing or a line is not ``id<TAB>valence<TAB>text``."""


def read_snippets(path: Path) -> tuple[list[str], np.ndarray]:
    """Texts and valences of a ground-truth file (UTF-8, LF or CRLF; blank lines skipped)."""
    if not path.is_file():
        raise DataError(f"{path}: no such file (get it from {SOURCE})")
    texts, valences = [], []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if raw.strip():
                text, valence = _snippet(raw, f"{path}:{number}")
                texts.append(text)
                valences.append(valence)
    if not texts:
        raise DataError(f"{path}: no snippets")
    return texts, np.array(valences)


def _snippet(raw: bytes, where: str) -> tuple[str, float]:
    """The text and valence of one line; ``where`` names it in errors."""
    try:
        line = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as error:
        raise DataError(f"{where}: not UTF-8 ({error.reason})") from None
    parts = line.split("\t")
    if len(parts) != 3 or not parts[2].strip():
        raise DataError(f"{where}: expected id<TAB>valence<TAB>text, found {line[:60]!r}")
    try:
        valence = float(parts[1])
    except ValueError:
        valence = float("nan")
    if not -4 <= valence <= 4:
        raise DataError(f"{where}: valence {parts[1]!r} is not a number in [-4, 4]")
    return parts[2].strip(), valence


def fold_ids(n: int, folds: int = FOLDS, seed: int = 0) -> np.ndarray:
    """Fold of each of ``n`` items: a fixed shuffle cut into ``folds`` nearly equal parts."""
    ids = np.empty(n, dtype=int)
    ids[np.random.default_rng(seed).permutation(n)] = np.arange(n) % folds
    return ids


def ridge_predictions(
    x: np.ndarray, y: np.ndarray, x_eval: np.ndarray, alphas: np.ndarray
) -> np.ndarray:
    """Predictions for ``x_eval`` [alphas, n_eval] of ridge fits with an unpenalised intercept."""
    x_mean, y_mean = x.mean(axis=0), y.mean()
    u, s, vt = np.linalg.svd(x - x_mean, full_matrices=False)
    shrink = s / (s**2 + alphas[:, None])  # [alphas, rank]
    coefs = (shrink * (u.T @ (y - y_mean))) @ vt  # [alphas, dims]
    return coefs @ (x_eval - x_mean).T + y_mean


def choose_alpha(x: np.ndarray, y: np.ndarray, alphas: np.ndarray) -> float:
    """The penalty with the least squared error in a 5-fold cross-validation over ``x`` alone."""
    inner = fold_ids(len(y), seed=1)
    errors = np.zeros(len(alphas))
    for fold in range(FOLDS):
        train, test = inner != fold, inner == fold
        predicted = ridge_predictions(x[train], y[train], x[test], alphas)
        errors += ((predicted - y[test]) ** 2).sum(axis=1)
    return float(alphas[np.argmin(errors)])


def cross_validated(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Out-of-fold predictions of every item, and each fold's penalty relative to its scale."""
    outer = fold_ids(len(y))
    predicted = np.empty(len(y))
    chosen = []
    for fold in range(FOLDS):
        train, test = outer != fold, outer == fold
        centered = x[train] - x[train].mean(axis=0)
        scale = (centered**2).sum() / x.shape[1]
        alpha = choose_alpha(x[train], y[train], RELATIVE_ALPHAS * scale)
        predicted[test] = ridge_predictions(x[train], y[train], x[test], np.array([alpha]))[0]
        chosen.append(alpha / scale)
    return predicted, chosen


def scores(predicted: np.ndarray, valence: np.ndarray) -> tuple[float, float]:
    """Pearson with the valence, and sign accuracy on the items with |valence| >= 0.5."""
    pearson = float(np.corrcoef(predicted, valence)[0, 1])
    polar = np.abs(valence) >= SIGN_THRESHOLD
    accuracy = float(np.mean(np.sign(predicted[polar]) == np.sign(valence[polar])))
    return pearson, accuracy


@dataclass(frozen=True)
class Row:
    """One way of embedding the texts."""

    label: str
    embed: Embed


def static_rows(
    name: str, vectors: StaticVectors, folder: Path, args: argparse.Namespace
) -> list[Row]:
    """Static vectors through spaCy, the model2vec export, and the export with the Lee options."""
    top = postprocess(vectors, PostProcessing(remove_top_pcs=args.remove_top_pcs))
    plain, both = saved(vectors, folder / "plain"), saved(top, folder / "both", args.sif)
    options = f"--remove-top-pcs {args.remove_top_pcs} --sif-coefficient {args.sif:g}"
    return [
        *(
            Row(f"{name}, spaCy doc.vector, doc_vector {mode}", SpacyDocs(plain, mode, args))
            for mode in DOC_VECTORS
        ),
        Row(f"{name}, model2vec export", model2vec_embed(plain / "model2vec")),
        Row(f"{name}, model2vec export, {options}", model2vec_embed(both / "model2vec")),
    ]


def teacher_rows(texts: list[str], model: str, folder: Path, args: argparse.Namespace) -> list[Row]:
    """Ours tuned on MiniLM's sentence vectors, and model2vec + tokenlearn (when they can run)."""
    rows, key = [], digest(model, texts)
    plain = saved(tuned_vectors(texts, model, args.work, key), folder / "tuned")
    name = "ours tuned (snippets)"  # the exports hold each row times its weight
    rows += [
        *(
            Row(f"{name}, spaCy doc.vector, doc_vector {mode}", SpacyDocs(plain, mode, args))
            for mode in DOC_VECTORS
        ),
        Row(f"{name}, model2vec export", model2vec_embed(plain / "model2vec")),
    ]
    trained = tokenlearn_model(texts, model, args.work, key, args.tokenlearn_python)
    if trained is not None:
        rows.append(
            Row("model2vec + tokenlearn, MiniLM teacher (snippets)", model2vec_embed(trained))
        )
    return rows


def cached(folder: Path, make: Callable[[], StaticVectors]) -> StaticVectors:
    """The vectors saved in ``folder``, made and saved there first when absent."""
    if (folder / "meta.json").is_file():
        return StaticVectors.load(folder)
    tick = time.perf_counter()
    vectors = make()
    print(f"  {folder.name}: {len(vectors):,} entries in {time.perf_counter() - tick:.0f} s")
    vectors.save(folder)
    return vectors


def ours(texts: list[str], model: str, work: Path, name: str) -> StaticVectors:
    """Vectors distilled from ``model`` over ``texts``, vocabulary built from them."""
    config = DistillConfig(model=model, min_count=1, max_contexts=0, device="cpu")
    key = digest(config.to_dict(), texts)
    return cached(work / f"{name}-{key}", lambda: distill(texts=texts, config=config))


def finetuned(texts: list[str], model: str, work: Path, args: argparse.Namespace) -> Path:
    """``model`` after masked-LM training on ``texts`` with a new head (cached)."""
    config = FinetuneConfig(
        model=model,
        init_mlm_head=True,
        max_steps=args.finetune_steps,
        max_length=args.finetune_max_length,
        batch_size=8,
        learning_rate=1e-4,
        device="cpu",
    )
    out = work / f"finetuned-{digest(config, texts)}"
    if not (out / FINETUNE_FILE).is_file():
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # the new head's load report is expected
        corpus = work / f"snippets-{digest(texts)}.txt"
        corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
        finetune(corpus, out, config, overwrite=True)  # an unfinished run leaves no marker
    record = json.loads((out / FINETUNE_FILE).read_text("utf-8"))
    before, after = (record["held_out"][f"perplexity_{when}"] for when in ("before", "after"))
    print(
        f"fine-tuned: {record['steps']} steps x 8 blocks of <= {config.max_length} tokens in "
        f"{record['seconds']:.0f} s; held-out perplexity {before or 0:,.0f} -> {after or 0:,.0f}"
    )
    return out


def background(lines: int) -> list[str]:
    """The Wikipedia + Lee text of ``quality.py`` (the first ``lines`` lines; 0: all)."""
    text = chain(wiki_paragraphs(), lee_documents())
    return list(islice(text, lines or None))


def vector_sets(texts: list[str], model: str, args: argparse.Namespace) -> dict[str, StaticVectors]:
    """Every static method's vectors, by row name."""
    work = args.work
    wider = texts + background(args.background_lines)
    snippets = ours(texts, model, work, "ours")
    tuned = str(finetuned(texts, model, work, args))
    config = DistillConfig(model=model, device="cpu")
    return {
        "ours (snippets)": snippets,
        "ours (snippets + Wikipedia)": ours(wider, model, work, "ours-wiki"),
        "ours, fine-tuned MiniLM (snippets)": ours(texts, tuned, work, "ours-tuned"),
        "decontextualized (each word alone)": with_counts_of(
            cached(
                work / f"alone-{digest(model, snippets.words)}",
                lambda: decontextualized(
                    *load_pretrained(config), Vocabulary(list(snippets.words)), config
                ),
            ),
            snippets,
        ),
        "Word2Vec (snippets)": cached(
            work / f"w2v-{digest(args.w2v_epochs, texts)}",
            lambda: word2vec_vectors(texts, args.w2v_epochs),
        ),
        "Word2Vec (snippets + Wikipedia)": cached(
            work / f"w2v-wiki-{digest(args.w2v_epochs, wider)}",
            lambda: word2vec_vectors(wider, args.w2v_epochs),
        ),
    }


def table(rows: list[Row], texts: list[str], valence: np.ndarray) -> str:
    """The markdown table: scores, penalties chosen, embedding time and speed-up over rows[0]."""
    lines = [
        "| method | Pearson | sign accuracy | alpha (relative) | embed all | vs MiniLM |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    reference = None
    for row in rows:
        x, seconds = timed(row.embed, texts, runs=2)
        reference = reference or seconds
        predicted, alphas = cross_validated(x, valence)
        pearson, accuracy = scores(predicted, valence)
        lines.append(
            f"| {row.label} | {pearson:.3f} | {accuracy:.1%} | {np.median(alphas):.0e} "
            f"| {seconds:.1f} s | {reference / seconds:,.0f}x |"
        )
        print(lines[-1], file=sys.stderr, flush=True)  # progress: the table comes at the end
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help=f"extracted folder of {SOURCE}")
    parser.add_argument("--work", type=Path, required=True, help="cache of distilled folders")
    parser.add_argument("--model", default=None, help="encoder (default: the offline MiniLM)")
    parser.add_argument("--sif", type=float, default=1e-3, help="SIF coefficient (Lee's best)")
    parser.add_argument("--remove-top-pcs", type=int, default=4, help="all-but-the-top D (Lee's)")
    parser.add_argument("--w2v-epochs", type=int, default=100, help="Word2Vec epochs")
    parser.add_argument("--finetune-steps", type=int, default=60, help="masked-LM steps")
    parser.add_argument("--finetune-max-length", type=int, default=128, help="block length")
    parser.add_argument(
        "--background-lines", type=int, default=0, help="Wikipedia + Lee lines (0: all)"
    )
    parser.add_argument(
        "--tokenlearn-python", type=Path, default=None, help="a Python with tokenlearn installed"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        texts, valence = read_snippets(args.data / SNIPPETS)
    except DataError as error:
        sys.exit(f"error: {error}")
    started = time.perf_counter()
    model = args.model or minilm_path()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; encoder: {model}")
    print(
        f"{len(texts):,} snippets, {np.mean(np.abs(valence) >= SIGN_THRESHOLD):.1%} with |valence| >= 0.5"
    )
    args.work.mkdir(parents=True, exist_ok=True)
    sets = vector_sets(texts, model, args)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [Row("MiniLM itself, sentence encoder (mean pooling)", st_embed(Path(model)))]
        for name, vectors in sets.items():
            rows += static_rows(name, vectors, Path(tmp) / str(len(rows)), args)
        rows += teacher_rows(texts, model, Path(tmp) / "teacher", args)
        print("\n" + table(rows, texts, valence))
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
