"""Merging equals distilling the whole: a corpus cut in two, each half distilled, then merged.

The halves and the whole are distilled with the same options and vocabulary; the merged vectors
are compared with the whole run's: the counts, the largest absolute difference of a coordinate,
and the lowest cosine between an entry's two vectors. With every occurrence (``--max-contexts 0``)
they should agree up to float32 rounding. Under a cap N, each half used up to N occurrences of an
entry, so merged counts may exceed N and the vectors differ from a run that stopped at N.

Usage: python benchmarks/merge.py [--corpus examples/wiki.txt] [--vocab examples/vocab.txt]
       [--model PATH] [--max-contexts 0,10]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from quality import minilm_path

from roberta_static import DistillConfig, distill

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def halves(corpus: Path, folder: Path) -> list[Path]:
    """The corpus's lines in two files, the first half and the rest."""
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    middle = len(lines) // 2
    paths = [folder / "first.txt", folder / "second.txt"]
    for path, part in zip(paths, (lines[:middle], lines[middle:]), strict=True):
        path.write_text("".join(part), encoding="utf-8")
    return paths


def timed(function, *args, **kwargs):
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - started


def compare(config: DistillConfig, parts: list[Path], vocab: Path) -> None:
    (first, a), (second, b) = (timed(distill, part, vocab, config) for part in parts)
    whole, c = timed(distill, parts, vocab, config)
    merged, d = timed(first.merge, second)
    rows = [merged.get_index(word) for word in whole.words]
    same_entries = sorted(merged.words) == sorted(whole.words)
    same_counts = bool((merged.counts[rows] == whole.counts).all())
    got = merged.vectors[rows].astype(np.float64)
    want = whole.vectors.astype(np.float64)
    cosine = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    cap = config.max_contexts
    print(f"--max-contexts {cap}: halves {a:.1f} s + {b:.1f} s, whole {c:.1f} s, merge {d:.3f} s")
    print(f"  entries {len(whole)} (same as the whole: {same_entries}), occurrences "
          f"{int(merged.counts.sum()):,} merged against {int(whole.counts.sum()):,} whole, "
          f"counts identical: {same_counts}")  # fmt: skip
    print(f"  largest difference {np.abs(got - want).max():.3g}, lowest cosine {cosine.min():.9f}")
    if cap:
        over = merged.counts > cap
        print(f"  entries averaging more than {cap} occurrences: {int(over.sum())} "
              f"(up to {int(merged.counts.max())})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=EXAMPLES / "wiki.txt")
    parser.add_argument("--vocab", type=Path, default=EXAMPLES / "vocab.txt")
    parser.add_argument("--model", default=None, help="default: the offline MiniLM")
    parser.add_argument("--max-contexts", default="0,10")
    args = parser.parse_args()
    args.model = args.model or minilm_path()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print(f"corpus {args.corpus} cut in two halves by lines; vocabulary {args.vocab}; "
          f"model {args.model}, every layer (the default)")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        parts = halves(args.corpus, Path(folder))
        for cap in (int(value) for value in args.max_contexts.split(",")):
            compare(DistillConfig(model=args.model, max_contexts=cap), parts, args.vocab)


if __name__ == "__main__":
    main()
