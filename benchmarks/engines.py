"""End to end on one machine: one process, ``--workers N``, and ``--engine ray``, same input.

Each run is a whole ``distill`` (segmentation, matching, tokenization, encoder, pooling) of the
same corpus, vocabulary and model, in this order: one process (``workers=1``), ``workers=N``
(N worker processes feed the encoder in this process), and the Ray engine on a local cluster of
``N`` CPUs started beforehand (its start-up time is printed apart; shard tasks feed one encoder
actor). Each run prints its encoder batches and their mean real tokens, and its vectors are
compared with the one-process run's: the smallest cosine over the entries and whether the counts
are identical.

Input: gensim's Wikipedia excerpt + lee_background.cor (2.6 MB), the SimLex-999 + WordSim-353
vocabulary, the offline all-MiniLM-L6-v2 on CPU (or ``--model``); ``--max-contexts`` 2000 (the
default), so the parallel runs also pay for the counting pass that keeps "the first N".

Usage: python benchmarks/engines.py [--workers 2] [--repeat 1] [--max-contexts 2000]
       [--model PATH] [--corpus FILE] [--vocab FILE] [--no-ray]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from extras import needs
from throughput import default_model, hardware, vocabulary_words, word_cosines, write_corpus

from roberta_static import DistillConfig, StaticVectors, distill
from roberta_static.text.vocab import Vocabulary


def timed_distill(
    corpus: Path, vocab: Vocabulary, config: DistillConfig
) -> tuple[StaticVectors, float]:
    start = time.perf_counter()
    vectors = distill([corpus], vocab, config)
    return vectors, time.perf_counter() - start


def agreement(vectors: StaticVectors, reference: StaticVectors) -> str:
    """The smallest cosine between the two runs' vectors of each entry, and whether counts match."""
    if vectors.words != reference.words:
        return "different entries"
    cosines = word_cosines(vectors, reference)
    same_counts = np.array_equal(vectors.counts, reference.counts)
    return f"min cosine {cosines.min():.7f}, counts {'identical' if same_counts else 'DIFFER'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="worker processes / Ray CPUs")
    parser.add_argument("--repeat", type=int, default=1, help="corpus copies")
    parser.add_argument("--max-contexts", type=int, default=2000)
    parser.add_argument("--model", default=None)
    parser.add_argument("--corpus", help="a text file instead of gensim's Wikipedia + Lee text")
    parser.add_argument("--vocab", help="a word list instead of SimLex-999 + WordSim-353's words")
    parser.add_argument("--no-ray", action="store_true", help="leave the Ray engine out")
    args = parser.parse_args()
    if not args.no_ray:  # before the runs without it, not after
        with needs("ray", instead="or pass --no-ray"):
            import ray

    print(hardware())
    base = DistillConfig(model=args.model or default_model(), max_contexts=args.max_contexts)
    vocab = Vocabulary.from_entries(vocabulary_words(args.vocab))
    runs = [
        ("one process", base),
        (f"--workers {args.workers}", base.replace(workers=args.workers)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        write_corpus(corpus, repeat=args.repeat, corpus=args.corpus)
        print(
            f"corpus {corpus.stat().st_size / 1e6:.1f} MB; {len(vocab):,} entries; max_contexts {args.max_contexts}"
        )
        results = []
        for name, config in runs:
            results.append((name, *timed_distill(corpus, vocab, config)))
        if not args.no_ray:
            start = time.perf_counter()
            ray.init(num_cpus=args.workers, include_dashboard=False)
            print(
                f"Ray local cluster of {args.workers} CPUs started in {time.perf_counter() - start:.1f} s (not counted below)"
            )
            try:
                config = base.replace(engine="ray", encoders=1)
                results.append(
                    (f"--engine ray ({args.workers} CPUs)", *timed_distill(corpus, vocab, config))
                )
            finally:
                ray.shutdown()
    reference = results[0][1]
    for name, vectors, seconds in results:
        stats = vectors.meta["stats"]
        print(
            f"{name:>28}: {seconds:7.1f} s  {stats['tokens'] / seconds:9,.0f} model tokens/s  "
            f"{stats['sentences'] / seconds:8,.0f} sentences/s  x{results[0][2] / seconds:.2f}  "
            f"{stats['batches']:,} batches of {stats['tokens'] / max(1, stats['batches']):,.0f} "
            f"tokens  {agreement(vectors, reference)}"
        )


if __name__ == "__main__":
    main()
