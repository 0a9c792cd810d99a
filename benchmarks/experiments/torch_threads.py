"""One process on the CPU: torch with every core against torch held to one thread.

``distill`` over the first ``--lines`` lines of gensim's Wikipedia + Lee text, the SimLex-999 +
WordSim-353 vocabulary, the offline all-MiniLM-L6-v2, default options; each setting in turn in
this process. Shows what the serial pass's thread budget costs a real encoder.

Usage: python benchmarks/experiments/torch_threads.py [--lines 300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the benchmarks it builds on
from throughput import default_model, vocabulary_words, write_corpus  # noqa: E402

from roberta_static import DistillConfig, distill
from roberta_static.text.vocab import Vocabulary


def timed(corpus: Path, vocab: Vocabulary, config: DistillConfig, threads: int) -> float:
    """Model tokens/s of one ``distill`` with torch allowed ``threads`` threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        start = time.perf_counter()
        vectors = distill([corpus], vocab, config)
        return vectors.meta["stats"]["tokens"] / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=300)
    args = parser.parse_args()
    config = DistillConfig(model=default_model())
    vocab = Vocabulary.from_entries(vocabulary_words(None))
    cores = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        write_corpus(corpus, lines=args.lines)
        for threads in (cores, 1):
            print(
                f"torch threads {threads}: {timed(corpus, vocab, config, threads):,.0f} model tokens/s"
            )


if __name__ == "__main__":
    main()
