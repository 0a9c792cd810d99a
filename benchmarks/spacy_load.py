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
        for doc_vector in ("mean", "weighted"):  # weighted also finds its weighting (an SVD)
            timings = load_save_reload(folder, doc_vector, Path(tmp) / doc_vector)
            print(
                f"{args.rows:,} x {args.dim} vectors, doc_vector {doc_vector}: add_pipe "
                f"{timings[0]:.2f} s, nlp.to_disk {timings[1]:.2f} s, spacy.load {timings[2]:.2f} s"
            )


def load_save_reload(folder: Path, doc_vector: str, out: Path) -> tuple[float, float, float]:
    """Seconds to add the component with the vectors, save the pipeline and load it back."""
    nlp = spacy.blank("en")
    start = time.perf_counter()
    nlp.add_pipe("roberta_static", config={"vectors": str(folder), "doc_vector": doc_vector})
    loaded = time.perf_counter() - start
    assert nlp.vocab.vectors.shape[0] == len(StaticVectors.load(folder).words)
    start = time.perf_counter()
    nlp.to_disk(out)
    saved = time.perf_counter() - start
    start = time.perf_counter()
    reloaded = spacy.load(out)
    reload_seconds = time.perf_counter() - start
    assert reloaded("WORD7")[0].has_vector
    return loaded, saved, reload_seconds


if __name__ == "__main__":
    main()
