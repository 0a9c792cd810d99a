"""How long the spaCy component takes to load a large vector table, and to save and reload it.

Usage: python benchmarks/spacy_load.py [--rows 100000] [--dim 768]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import spacy

from roberta_static import StaticVectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=768)
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {platform.python_version()}")
    rng = np.random.default_rng(0)
    words = [f"word{i}" for i in range(args.rows)]
    vectors = StaticVectors(
        words,
        rng.standard_normal((args.rows, args.dim), dtype=np.float32),
        np.ones(args.rows),
        {"config": {"case": "lower"}},
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = vectors.save(Path(tmp) / "vectors")
        nlp = spacy.blank("en")
        start = time.perf_counter()
        nlp.add_pipe("roberta_static", config={"vectors": str(folder)})
        loaded = time.perf_counter() - start
        assert nlp.vocab.vectors.shape == (args.rows, args.dim)
        start = time.perf_counter()
        nlp.to_disk(Path(tmp) / "pipeline")
        saved = time.perf_counter() - start
        start = time.perf_counter()
        reloaded = spacy.load(Path(tmp) / "pipeline")
        reload_seconds = time.perf_counter() - start
        assert reloaded("WORD7")[0].has_vector
    print(
        f"{args.rows:,} x {args.dim} vectors: add_pipe {loaded:.2f} s, "
        f"nlp.to_disk {saved:.2f} s, spacy.load {reload_seconds:.2f} s"
    )


if __name__ == "__main__":
    main()
