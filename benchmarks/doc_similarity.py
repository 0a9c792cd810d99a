"""Document similarity on gensim's Lee corpus: Pearson with human judgements of 1,225 pairs.

Data (in ``gensim/test/test_data``): ``lee.cor`` (50 news documents), ``similarities0-1.txt`` (their
averaged human similarity judgements) and ``lee_background.cor`` (300 documents). gensim's
``test_lee.py`` requires its LSI pipeline to pass 0.6, the figure of Lee et al. (2005).

Every method sees the same text, background plus the 50 documents (read as latin-1, as
``test_lee.py`` does):
- roberta-static: distilled over that text with the offline all-MiniLM-L6-v2, vocabulary built from
  it (every word, ``min_count=1``), ``max_contexts=0`` so counts are frequencies; scored through
  spaCy ``doc.similarity`` over the pairs (the ``roberta_static`` component, ``doc_vector``
  ``mean`` and ``weighted``, the latter with the same ``--remove-top-pcs`` and SIF ``a``) and
  through the model2vec and sentence-transformers exports, plain, with all-but-the-top
  (``--remove-top-pcs``) and with SIF weighting (``--sif-coefficient``);
- the decontextualized baseline (each word alone through the model), scored the same ways, with
  the corpus counts of our run for SIF;
- gensim Word2Vec (skip-gram, 100 dimensions) trained on the same text, scored the same ways, with
  its counts for SIF; 100 epochs, since this text is small (10 epochs score far lower);
- gensim LSI exactly as ``test_lee.py`` builds it (log-entropy, 200 topics); its time is the
  folding-in of the 50 documents, measured once;
- MiniLM itself as a sentence encoder (sentence-transformers, mean pooling, 256 word pieces);
- roberta-static tuned on MiniLM's own sentence vectors of the same text (``distill`` keeping
  sentence targets, then ``tune``), through spaCy ``doc.similarity`` (``doc_vector`` weighted:
  the learned weights) and the model2vec export, with what tuning costs on word similarity
  (SimLex-999, WordSim-353); and model2vec + tokenlearn trained on the same text with MiniLM as
  teacher (see ``teacher_rows.py`` for both, and when they are skipped).

Times are the best of 3 runs embedding the 50 documents (spaCy: ``nlp.pipe`` and ``doc.vector``),
models already loaded.

Usage: python benchmarks/doc_similarity.py [--model PATH] [--sif 1e-3] [--remove-top-pcs 4]
       [--w2v-epochs 100] [--work DIR] [--tokenlearn-python PYTHON]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import spacy
from extras import needs
from gensim import corpora, matutils, models
from gensim.models import Word2Vec
from gensim.parsing.preprocessing import preprocess_documents
from gensim.test.utils import datapath
from quality import DATASETS, minilm_path
from scipy.stats import spearmanr

from roberta_static import DistillConfig, StaticVectors, distill
from roberta_static.api import decontextualized
from roberta_static.formats.exports import export
from roberta_static.model.loading import load_pretrained
from roberta_static.quality.evaluate import dataset_path, evaluate_pairs
from roberta_static.text.segment import load_segmenter
from roberta_static.text.vocab import Vocabulary
from roberta_static.vectors.postprocess import PostProcessing, postprocess

with needs("exports"):
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

Embed = Callable[[list[str]], np.ndarray]
Scores = Callable[[list[str]], np.ndarray]
PAIRS = np.triu_indices(50, 1)


def read_lee(name: str) -> list[str]:
    """One document per line, decoded as latin-1 like ``test_lee.py``."""
    with open(datapath(name), "rb") as handle:
        return [line.decode("latin1").strip() for line in handle if line.strip()]


def pair_cosines(embeddings: np.ndarray) -> np.ndarray:
    """The cosine of each pair of documents' embeddings."""
    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    return (unit @ unit.T)[PAIRS]


def correlations(scores: np.ndarray, human: np.ndarray) -> tuple[float, float]:
    """Pearson and Spearman of the pairs' similarities with the human judgements."""
    return float(np.corrcoef(scores, human)[0, 1]), float(spearmanr(scores, human).statistic)


def timed(embed: Embed, docs: list[str], runs: int = 3) -> tuple[np.ndarray, float]:
    """Embeddings of ``docs`` and the best of ``runs`` timings."""
    seconds = []
    for _ in range(runs):
        tick = time.perf_counter()
        embeddings = np.asarray(embed(docs), dtype=np.float64)
        seconds.append(time.perf_counter() - tick)
    return embeddings, min(seconds)


def lsi_test_lee(background: list[str], docs: list[str], human: np.ndarray) -> tuple[float, float]:
    """gensim's ``test_lee.py`` pipeline: its Pearson, and the time to embed the 50 documents."""
    bg_corpus = preprocess_documents(background)
    dictionary = corpora.Dictionary(bg_corpus)
    bg_bow = [dictionary.doc2bow(text) for text in bg_corpus]
    log_ent = models.LogEntropyModel(bg_bow)
    lsi = models.LsiModel(log_ent[bg_bow], id2word=dictionary, num_topics=200)
    tick = time.perf_counter()
    corpus_lsi = [lsi[log_ent[dictionary.doc2bow(text)]] for text in preprocess_documents(docs)]
    seconds = time.perf_counter() - tick
    res = np.array([[matutils.cossim(a, b) for b in corpus_lsi] for a in corpus_lsi])
    return float(np.corrcoef(res[PAIRS], human)[0, 1]), seconds


class SpacyDocs:
    """A blank pipeline with the ``roberta_static`` component: ``doc.vector`` to time, and
    ``doc.similarity`` over the pairs to score."""

    def __init__(self, folder: Path, doc_vector: str, args: argparse.Namespace) -> None:
        self.nlp = spacy.blank("en")
        config = {
            "vectors": str(folder),
            "doc_vector": doc_vector,
            "remove_top_pcs": args.remove_top_pcs,
            "sif_coefficient": args.sif,
        }
        self.nlp.add_pipe("roberta_static", config=config)

    def __call__(self, texts: list[str]) -> list[np.ndarray]:
        return [doc.vector for doc in self.nlp.pipe(texts)]

    def similarities(self, texts: list[str]) -> np.ndarray:
        docs = list(self.nlp.pipe(texts))
        return np.array([docs[i].similarity(docs[j]) for i, j in zip(*PAIRS, strict=True)])


def model2vec_embed(folder: Path) -> Embed:
    return StaticModel.from_pretrained(folder).encode


def st_embed(folder: Path) -> Embed:
    return SentenceTransformer(str(folder), device="cpu").encode


def saved(vectors: StaticVectors, folder: Path, sif: float | None = None) -> Path:
    """Save the vectors into ``folder`` with model2vec and sentence-transformers exports."""
    vectors.save(folder)
    export(folder, ["model2vec", "sentence-transformers"], sif_coefficient=sif)
    return folder


def static_rows(
    name: str, vectors: StaticVectors, folder: Path, args: argparse.Namespace
) -> list[tuple[str, Embed]]:
    """The ways static vectors embed a document: spaCy, the exports; plain, post-processed, SIF."""
    top = postprocess(vectors, PostProcessing(remove_top_pcs=args.remove_top_pcs))
    plain, weighted = saved(vectors, folder / "plain"), saved(vectors, folder / "sif", args.sif)
    top_only, both = saved(top, folder / "top"), saved(top, folder / "both", args.sif)
    return [
        (f"{name}: spaCy doc.similarity, doc_vector mean", SpacyDocs(plain, "mean", args)),
        (f"{name}: spaCy doc.similarity, mean, top PCs removed", SpacyDocs(top_only, "mean", args)),
        (f"{name}: spaCy doc.similarity, doc_vector weighted", SpacyDocs(plain, "weighted", args)),
        (f"{name}: model2vec export", model2vec_embed(plain / "model2vec")),
        (f"{name}: model2vec export, SIF", model2vec_embed(weighted / "model2vec")),
        (f"{name}: model2vec export, top PCs removed + SIF", model2vec_embed(both / "model2vec")),
        (
            f"{name}: sentence-transformers export, top PCs removed + SIF",
            st_embed(both / "sentence-transformers"),
        ),
    ]


def sif_sweep(vectors: StaticVectors, folder: Path, docs: list[str], human: np.ndarray) -> None:
    """Pearson of the model2vec export by SIF coefficient (rows) and top PCs removed (columns)."""
    depths = (0, 2, 4, 6, 8)
    print(f"{'SIF a':>8}" + "".join(f"{f'D={d}':>8}" for d in depths))
    for sif in (None, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2):
        cells = []
        for depth in depths:
            processed = postprocess(vectors, PostProcessing(remove_top_pcs=depth))
            target = folder / f"{sif}-{depth}"
            processed.save(target)
            export(target, ["model2vec"], sif_coefficient=sif)
            embeddings = model2vec_embed(target / "model2vec")(docs)
            cells.append(correlations(pair_cosines(embeddings), human)[0])
        print(f"{str(sif):>8}" + "".join(f"{c:>8.3f}" for c in cells))


def teacher_rows(
    texts: list[str], model: str, folder: Path, args: argparse.Namespace, ours: StaticVectors
) -> list[tuple[str, Embed]]:
    """Ours tuned on MiniLM's sentence vectors, and model2vec + tokenlearn (when they can run)."""
    from teacher_rows import tokenlearn_model, tuned_vectors

    key = digest(model, texts)
    rows: list[tuple[str, Embed]] = []
    tuned = tuned_vectors(texts, model, args.work, key)
    word_costs(ours, tuned)
    plain = saved(tuned, folder / "tuned")  # the exports hold each row times its weight
    rows += [
        *(
            (
                f"roberta-static tuned: spaCy doc.similarity, doc_vector {mode}",
                SpacyDocs(plain, mode, args),
            )
            for mode in ("mean", "weighted")
        ),
        ("roberta-static tuned: model2vec export", model2vec_embed(plain / "model2vec")),
    ]
    trained = tokenlearn_model(texts, model, args.work, key, args.tokenlearn_python)
    if trained is not None:
        rows.append(
            ("model2vec + tokenlearn (MiniLM teacher): model2vec", model2vec_embed(trained))
        )
    return rows


def word_costs(untuned: StaticVectors, tuned: StaticVectors) -> None:
    """Spearman x 100 on the word-pair datasets, before and after tuning (same covered pairs)."""
    for name in DATASETS:
        path = dataset_path(name)[1]
        before, after = (
            evaluate_pairs(vectors.to_keyed_vectors(), path, lower=True)
            for vectors in (untuned, tuned)
        )
        print(
            f"word similarity, {name}: Spearman {before.spearman:.1f} untuned, {after.spearman:.1f} "
            f"tuned ({after.covered} of {after.pairs} pairs)"
        )


def digest(*parts: object) -> str:
    """A short key of a cached result's inputs."""
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:12]


def word2vec_vectors(texts: list[str], epochs: int) -> StaticVectors:
    """Skip-gram Word2Vec on the words our corpus vocabulary counts (no punctuation), with counts."""
    nlp = load_segmenter("en")
    sentences = [
        [t.lower_ for t in doc if not (t.is_punct or t.is_space)]
        for doc in nlp.tokenizer.pipe(texts)
    ]
    kv = Word2Vec(
        sentences, vector_size=100, window=5, min_count=1, sg=1, epochs=epochs, workers=2, seed=0
    ).wv
    counts = np.array([kv.get_vecattr(w, "count") for w in kv.index_to_key])
    return StaticVectors(list(kv.index_to_key), kv.vectors, counts, {"config": {"case": "lower"}})


def with_counts_of(vectors: StaticVectors, source: StaticVectors) -> StaticVectors:
    """``vectors`` with the corpus counts ``source`` has for the same words (SIF needs them)."""
    count = dict(zip(source.words, source.counts.tolist(), strict=True))
    counts = np.array([count[w] for w in vectors.words])
    return StaticVectors(vectors.words, vectors.vectors, counts, vectors.meta)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="encoder (default: the offline MiniLM)")
    parser.add_argument("--sif", type=float, default=1e-3, help="SIF coefficient of the exports")
    parser.add_argument("--remove-top-pcs", type=int, default=4, help="all-but-the-top D")
    parser.add_argument("--w2v-epochs", type=int, default=100, help="Word2Vec epochs")
    parser.add_argument("--work", type=Path, default=None, help="cache of the tuned rows' folders")
    parser.add_argument(
        "--tokenlearn-python", type=Path, default=None, help="a Python with tokenlearn installed"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    docs, background = read_lee("lee.cor"), read_lee("lee_background.cor")
    human = np.loadtxt(datapath("similarities0-1.txt"))[PAIRS]
    texts = background + docs
    config = DistillConfig(model=args.model or minilm_path(), min_count=1, max_contexts=0)

    tick = time.perf_counter()
    ours = distill(texts=texts, config=config)
    distill_seconds = time.perf_counter() - tick
    model, tokenizer = load_pretrained(config)
    alone = decontextualized(model, tokenizer, Vocabulary(list(ours.words)), config)
    alone = with_counts_of(alone, ours)
    tick = time.perf_counter()
    word2vec = word2vec_vectors(texts, args.w2v_epochs)
    word2vec_seconds = time.perf_counter() - tick
    print(f"encoder: {config.model}")
    print(
        f"distill: {len(ours):,} entries, {distill_seconds:.0f} s; Word2Vec: {word2vec_seconds:.0f} s"
    )
    print(
        f"top PCs removed: --remove-top-pcs {args.remove_top_pcs}; SIF: --sif-coefficient {args.sif}"
    )

    lsi_pearson, lsi_seconds = lsi_test_lee(background, docs, human)
    minilm = "MiniLM itself, sentence encoder (mean pooling)"
    embedded = {minilm: timed(st_embed(Path(config.model)), docs)}
    similarities: dict[str, np.ndarray] = {}
    minilm_seconds = embedded[minilm][1]
    print(f"\n{'method':68}{'Pearson':>8}{'Spearman':>9}{'50 docs ms':>11}{'speed-up':>9}")
    print(
        f"{'gensim LSI as test_lee.py':68}{lsi_pearson:>8.3f}{'':>9}{lsi_seconds * 1e3:>11.1f}"
        f"{minilm_seconds / lsi_seconds:>8.0f}x"
    )
    with tempfile.TemporaryDirectory() as tmp:
        args.work = args.work or Path(tmp) / "work"
        args.work.mkdir(parents=True, exist_ok=True)
        labelled = [
            (label, embed)
            for name, vectors in (
                ("roberta-static", ours),
                ("decontextualized", alone),
                ("Word2Vec", word2vec),
            )
            for label, embed in static_rows(name, vectors, Path(tmp) / name, args)
        ]
        labelled += teacher_rows(texts, config.model, Path(tmp) / "teacher", args, ours)
        for label, embed in labelled:
            embedded[label] = timed(embed, docs)
            if isinstance(embed, SpacyDocs):  # scored by doc.similarity itself
                similarities[label] = embed.similarities(docs)
        for label, (embeddings, seconds) in embedded.items():
            scores = similarities.get(label)
            scores = pair_cosines(embeddings) if scores is None else scores
            pearson, spearman = correlations(scores, human)
            print(
                f"{label:68}{pearson:>8.3f}{spearman:>9.3f}{seconds * 1e3:>11.1f}{minilm_seconds / seconds:>8.0f}x"
            )
        print(
            "\nroberta-static, model2vec export: Pearson by SIF a (rows) and top PCs removed D (columns)"
        )
        sif_sweep(ours, Path(tmp) / "sweep", docs, human)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
