"""spaCy text classification with static vectors: does ``include_static_vectors`` help with ours?

Data: VADER's movie-review snippets (Hutto & Gilbert, ICWSM 2014; Pang & Lee's sentences with
the mean valence human raters gave them), ``movieReviewSnippets_GroundTruth.txt`` in the folder
extracted from ``additional_resources/hutto_ICWSM_2014.tar.gz`` of github.com/cjhutto/vaderSentiment
(``id<TAB>valence<TAB>text``). Label: ``POS`` when the valence is above 0, else ``NEG``.

Splits, fixed: 2,000 test and 500 dev snippets drawn once (seed 0); the rest is the training pool.
Each training size (250, 1,000, the whole pool) is drawn from the pool per seed; the seed is also
``[system] seed``. Every cell is a real ``spacy train`` (``spacy.cli.train.train``) of
``examples/textcat_static_vectors.cfg`` (tok2vec with ``include_static_vectors = true``, a
``TextCatReduce`` textcat; its step budget and patience are the same for all), scored by accuracy
on the test split with ``model-best`` (chosen on dev). Conditions:
- ``none``: the same config with ``include_static_vectors = false`` and no vectors loaded;
- ``ours``: ``roberta-static distill`` over the text of all snippets with the offline
  all-MiniLM-L6-v2 on CPU (vocabulary built from them, ``--min-count``), loaded by
  ``[initialize.before_init]`` (``roberta_static.load_vectors.v1``);
- ``word2vec``: gensim Word2Vec (skip-gram, window 5) of the same width trained on the same text
  (spaCy's tokens, lower-cased, as distill segments and matches it; same ``--min-count``), saved as
  word2vec text and loaded the same way.
Both vector sets read the test snippets' text (never their labels), as a user's unlabelled domain
text would include them.

Results are cached per cell under ``--work`` (so seeds can be added later); the table is printed
from every cell found there for the sizes and conditions asked.

Usage: nice -n 10 python benchmarks/spacy_textcat.py --data DIR --work DIR [--seeds 0 1 2]
       [--sizes 250 1000 0] [--conditions none ours word2vec] [--min-count 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import spacy
from extras import packaged_model
from gensim.models import Word2Vec
from spacy.cli.train import train
from spacy.tokens import DocBin
from thinc.api import Config

from roberta_static import StaticVectors

CONFIG = Path(__file__).resolve().parent.parent / "examples" / "textcat_static_vectors.cfg"
SNIPPETS = "movieReviewSnippets_GroundTruth.txt"
TEST_SIZE, DEV_SIZE = 2000, 500
CONDITIONS = ("none", "ours", "word2vec")


def read_snippets(folder: Path) -> tuple[list[str], np.ndarray]:
    """Texts and valences of the movie-review snippets."""
    path = folder / SNIPPETS
    if not path.is_file():
        sys.exit(f"error: {path}: no such file (extract hutto_ICWSM_2014.tar.gz, pass its folder)")
    texts, valences = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            _, valence, text = line.split("\t", 2)
            texts.append(text.strip())
            valences.append(float(valence))
    return texts, np.array(valences)


def splits(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fixed test, dev and training-pool indices."""
    order = np.random.default_rng(0).permutation(n)
    return order[:TEST_SIZE], order[TEST_SIZE : TEST_SIZE + DEV_SIZE], order[TEST_SIZE + DEV_SIZE :]


def write_docbin(path: Path, texts: list[str], positive: np.ndarray, rows: np.ndarray) -> Path:
    """A DocBin of the rows' texts with exclusive POS/NEG cats (kept if already there)."""
    if not path.exists():
        nlp = spacy.blank("en")
        docs = DocBin()
        for row in rows:
            doc = nlp.make_doc(texts[row])
            doc.cats = {"POS": float(positive[row]), "NEG": float(not positive[row])}
            docs.add(doc)
        path.parent.mkdir(parents=True, exist_ok=True)
        docs.to_disk(path)
    return path


def distill_ours(corpus: Path, out: Path, min_count: int) -> Path:
    """Our vectors over the snippets: the roberta-static CLI, MiniLM on CPU."""
    if not out.exists():
        command = ["roberta-static", "distill", str(corpus), "--model", "minilm", "--device", "cpu"]
        command += ["--min-count", str(min_count), "--out", str(out)]
        tick = time.perf_counter()
        subprocess.run(command, check=True)
        print(f"distill: {time.perf_counter() - tick:.0f} s ({' '.join(command)})")
    return out


def train_word2vec(corpus: Path, out: Path, width: int, min_count: int) -> Path:
    """Word2Vec of ``width`` dimensions over the snippets, tokenised and lower-cased as distill."""
    path = out / "vectors.txt"
    if not path.exists():
        nlp = spacy.blank("en")
        lines = corpus.read_text(encoding="utf-8").splitlines()
        sentences = [[t.lower_ for t in doc if not t.is_space] for doc in nlp.pipe(lines)]
        tick = time.perf_counter()
        model = Word2Vec(
            sentences, vector_size=width, window=5, min_count=min_count, sg=1, epochs=20, seed=0
        )
        print(f"word2vec: {time.perf_counter() - tick:.0f} s, {len(model.wv)} words")
        out.mkdir(parents=True, exist_ok=True)
        model.wv.save_word2vec_format(str(path))
    return path


def cell_config(condition: str, vectors: Path | None, folder: Path) -> Path:
    """The shipped config, without static vectors for ``none``."""
    config = Config().from_disk(CONFIG, interpolate=False)
    if condition == "none":
        config["components"]["tok2vec"]["model"]["embed"]["include_static_vectors"] = False
        del config["initialize"]["before_init"]
    else:
        config["paths"]["static_vectors"] = str(vectors)
    folder.mkdir(parents=True, exist_ok=True)
    config.to_disk(folder / "config.cfg")
    return folder / "config.cfg"


def accuracy(model: Path, test: Path) -> float:
    """Share of test docs whose highest-scoring label is the gold one."""
    nlp = spacy.load(model)
    gold = list(DocBin().from_disk(test).get_docs(nlp.vocab))
    predicted = nlp.pipe(doc.text for doc in gold)
    hits = [
        max(p.cats, key=p.cats.get) == max(g.cats, key=g.cats.get)
        for p, g in zip(predicted, gold, strict=True)
    ]
    return float(np.mean(hits))


def run_cell(work: Path, condition: str, size: int, seed: int, data: dict) -> dict:
    """Train one cell (or read its cached result)."""
    name = f"{condition}-{size or 'all'}-{seed}"
    result_path = work / "results" / f"{name}.json"
    if result_path.exists():
        return json.loads(result_path.read_text())
    pool = data["pool"]
    rows = pool if not size else np.random.default_rng(seed).choice(pool, size, replace=False)
    train_path = write_docbin(
        work / "corpora" / f"train-{size or 'all'}-{seed}.spacy", data["texts"], data["pos"], rows
    )
    folder = work / "runs" / name
    config = cell_config(condition, data["vectors"].get(condition), folder)
    overrides = {
        "paths.train": str(train_path),
        "paths.dev": str(data["dev"]),
        "system.seed": seed,
    }
    tick = time.perf_counter()
    with open(folder / "train.log", "w") as log, contextlib.redirect_stdout(log):
        train(config, folder / "output", overrides=overrides)
    seconds = time.perf_counter() - tick
    result = {
        "accuracy": accuracy(folder / "output" / "model-best", data["test"]),
        "seconds": seconds,
    }
    result_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps(result))
    print(f"{name}: accuracy {result['accuracy']:.4f}, {seconds:.0f} s", flush=True)
    return result


def spread(values: np.ndarray) -> float:
    """Sample standard deviation (0 for one value)."""
    return float(values.std(ddof=1)) if len(values) > 1 else 0.0


def caption() -> str:
    """What every cell shares: the training budget of the shipped config."""
    training = Config().from_disk(CONFIG, interpolate=False)["training"]
    size = training["batcher"]["size"]
    return (
        f"Test accuracy (%) on {TEST_SIZE:,} held-out snippets, mean ± sample sd over seeds (n), "
        f"mean seconds of `spacy train`; every cell: max_steps {training['max_steps']}, "
        f"patience {training['patience']}, eval every {training['eval_frequency']} steps on "
        f"{DEV_SIZE} dev snippets, batches of {size['start']} to {size['stop']} words."
    )


def print_table(work: Path, sizes: list[int], pool: int) -> None:
    """Markdown table of every cached cell: accuracy mean ± sd (seeds), mean training time."""
    print(f"\n{caption()}\n")
    print("| training snippets | " + " | ".join(CONDITIONS) + " |")
    print("| --- |" + " --- |" * len(CONDITIONS))
    for size in sizes:
        cells = []
        for condition in CONDITIONS:
            found = sorted((work / "results").glob(f"{condition}-{size or 'all'}-*.json"))
            runs = [json.loads(p.read_text()) for p in found]
            if not runs:
                cells.append("not run")
                continue
            acc = np.array([r["accuracy"] for r in runs]) * 100
            seconds = np.mean([r["seconds"] for r in runs])
            cells.append(f"{acc.mean():.1f} ± {spread(acc):.1f} (n={len(runs)}, {seconds:.0f} s)")
        print(f"| {size or f'all ({pool:,})'} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="extracted hutto_ICWSM_2014")
    parser.add_argument("--work", type=Path, required=True, help="cache: vectors, corpora, runs")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 1000, 0], help="0 = all")
    parser.add_argument("--conditions", nargs="+", choices=CONDITIONS, default=list(CONDITIONS))
    parser.add_argument("--min-count", type=int, default=2, help="vocabulary of both vector sets")
    args = parser.parse_args()
    if "ours" in args.conditions:
        packaged_model("minilm")  # distill_ours runs the CLI with --model minilm
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, spaCy {spacy.__version__}"
    )
    texts, valences = read_snippets(args.data)
    test, dev, pool = splits(len(texts))
    corpus = args.work / "snippets.txt"
    if not corpus.exists():
        args.work.mkdir(parents=True, exist_ok=True)
        corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    ours = distill_ours(corpus, args.work / "vectors" / "ours", args.min_count)
    width = StaticVectors.load(ours).vectors.shape[1]
    positive = valences > 0
    data = {
        "texts": texts,
        "pos": positive,
        "pool": pool,
        "test": write_docbin(args.work / "corpora" / "test.spacy", texts, positive, test),
        "dev": write_docbin(args.work / "corpora" / "dev.spacy", texts, positive, dev),
        "vectors": {
            "ours": ours,
            "word2vec": train_word2vec(
                corpus, args.work / "vectors" / "word2vec", width, args.min_count
            ),
        },
    }
    print(
        f"{len(texts):,} snippets: {positive.mean():.1%} positive; test {len(test):,}, "
        f"dev {len(dev):,}, pool {len(pool):,}; {width}-dimensional vectors"
    )
    for seed in args.seeds:
        for size in args.sizes:
            for condition in args.conditions:
                run_cell(args.work, condition, size, seed, data)
    print_table(args.work, args.sizes, len(pool))


if __name__ == "__main__":
    main()
