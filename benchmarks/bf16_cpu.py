"""bfloat16 against float32 on the CPU: speed, and the effect on the vectors and their scores.

Distills the SimLex-999 + WordSim-353 vocabulary over gensim's Wikipedia + Lee text with the offline
all-MiniLM-L6-v2, once in float32 and once in bfloat16, same options otherwise. Prints each run's
model tokens/s, the cosine between each word's two vectors, and Spearman x 100 on both datasets.
``--max-contexts`` (default 100) keeps the bfloat16 run short where the CPU has no bfloat16 units.

Usage: python benchmarks/bf16_cpu.py [--max-contexts 100] [--model PATH]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from gensim_corpus import lee_documents, wiki_paragraphs
from quality import DATASETS, dataset_words, minilm_path
from throughput import hardware, word_cosines

from roberta_static import DistillConfig
from roberta_static.api import distill_from_model
from roberta_static.model.loading import load_pretrained
from roberta_static.quality.evaluate import dataset_path, evaluate_pairs
from roberta_static.text.corpus import Corpus
from roberta_static.text.vocab import Vocabulary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-contexts", type=int, default=100)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    print(f"hardware: {hardware()}")
    vocab = Vocabulary.from_entries(dataset_words())
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.txt"
        corpus_file.write_text("\n".join([*wiki_paragraphs(), *lee_documents()]) + "\n")
        for dtype in ("float32", "bfloat16"):
            config = DistillConfig(
                model=args.model or minilm_path(), dtype=dtype, max_contexts=args.max_contexts
            )
            model, tokenizer = load_pretrained(config)
            started = time.perf_counter()
            vectors = distill_from_model(model, tokenizer, Corpus([corpus_file]), vocab, config)
            seconds = time.perf_counter() - started
            tokens = vectors.meta["stats"]["tokens"]
            scores = {
                d: evaluate_pairs(vectors.to_keyed_vectors(), dataset_path(d)[1], True, d)
                for d in DATASETS
            }
            print(
                f"{dtype:9} {seconds:7.1f} s  {tokens / seconds:8,.0f} model tokens/s  "
                + "  ".join(f"{d} {s.spearman:.1f} ({s.covered} pairs)" for d, s in scores.items())
            )
            runs[dtype] = (vectors, scores)
    (full, full_scores), (half, half_scores) = runs["float32"], runs["bfloat16"]
    cosine = word_cosines(full, half)
    print(
        f"cosine(float32, bfloat16) per word: mean {cosine.mean():.5f}, "
        f"min {cosine.min():.5f} over {len(cosine):,} words"
    )
    print(
        "Spearman change (bfloat16 - float32): "
        + ", ".join(
            f"{d} {half_scores[d].spearman - full_scores[d].spearman:+.2f}" for d in DATASETS
        )
    )
    print(f"threads: {torch.get_num_threads()}; max_contexts {args.max_contexts}")


if __name__ == "__main__":
    main()
