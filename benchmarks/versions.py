"""Two installed versions of roberta-static, timed in one run: is the new one slower?

Runs each ``roberta-static`` command given (``--old``, ``--new``: paths of the console script in
two virtual environments) on the same input, alternating (old, new, new, old, ...) so both share
the machine's load, and prints model tokens/s as each run's meta.json counts them
(``stats.tokens / stats.seconds``), best and median, and the ratio new/old.

Input: the first ``--lines`` lines (default 1,000; 0 all) of gensim's Wikipedia excerpt +
lee_background.cor, the SimLex-999 + WordSim-353 vocabulary, the offline all-MiniLM-L6-v2 on the
CPU, default options (``--workers`` as each version defaults, unless ``--options`` says more).

Usage: python benchmarks/versions.py --old OLD/bin/roberta-static --new NEW/bin/roberta-static
       [--lines 1000] [--repeat 3] [--options "--max-contexts 100"]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import tempfile
from pathlib import Path

from throughput import default_model, hardware, vocabulary_words, write_corpus


def rate(command: str, corpus: Path, vocab: Path, out: Path, options: list[str]) -> float:
    """Model tokens/s of one ``distill`` run, as its meta.json counts them."""
    base = [command, "distill", str(corpus), "--vocab", str(vocab), "--model", default_model()]
    subprocess.run([*base, "--out", str(out), "--quiet", *options], check=True)
    stats = json.loads((out / "meta.json").read_text())["stats"]
    return stats["tokens"] / stats["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the old version's roberta-static command")
    parser.add_argument("--new", required=True, help="the new version's roberta-static command")
    parser.add_argument("--lines", type=int, default=1000, help="lines of the text (0: all)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each version")
    parser.add_argument("--options", default="", help="more distill options, for both")
    args = parser.parse_args()
    print(f"hardware: {hardware()}")
    rates: dict[str, list[float]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        corpus, vocab = Path(tmp) / "corpus.txt", Path(tmp) / "vocab.txt"
        write_corpus(corpus, lines=args.lines)
        vocab.write_text("\n".join(vocabulary_words(None)) + "\n")
        for run in range(args.repeat):
            order = ["old", "new"] if run % 2 == 0 else ["new", "old"]
            for label in order:
                out = Path(tmp) / f"{label}-{run}"
                found = rate(getattr(args, label), corpus, vocab, out, shlex.split(args.options))
                rates[label].append(found)
                print(f"{label} run {run + 1}: {found:,.0f} model tokens/s", flush=True)
    for label, found in rates.items():
        print(f"{label}: best {max(found):,.0f}, median {statistics.median(found):,.0f} tokens/s")
    ratio = max(rates["new"]) / max(rates["old"])
    median = statistics.median(rates["new"]) / statistics.median(rates["old"])
    print(f"new / old: {ratio:.2f}x best, {median:.2f}x median")


if __name__ == "__main__":
    main()
