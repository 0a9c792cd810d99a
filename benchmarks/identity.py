"""Hashes of the vectors each way of running ``distill`` gives, to compare two versions of the code.

Runs the ``roberta-static`` command found on PATH (so the same script checks any version) on the
benchmark text, and prints the SHA-256 of ``vectors.npy`` and ``vocab.tsv`` of each run:

- one process;
- ``--workers 2``;
- ``--engine ray --workers 2`` (a local cluster the run starts);
- ``--max-contexts 7``, in one process and with ``--workers 2``;
- stopped and resumed: a one-process run with ``--checkpoint-every 1`` gets Ctrl-C (SIGINT) once
  its first checkpoint is written, and ``--resume`` finishes it. Its vectors must equal the
  one-process run's.

Input: the first ``--lines`` lines (default 400) of gensim's Wikipedia excerpt + lee_background.cor,
the SimLex-999 + WordSim-353 vocabulary, the offline all-MiniLM-L6-v2 on CPU (or ``--model``).

Usage: python benchmarks/identity.py [--lines 400] [--model PATH] [--no-ray] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from throughput import default_model, vocabulary_words, write_corpus


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def distill(base: list[str], out: Path, *options: str) -> None:
    subprocess.run([*base, "--out", str(out), "--quiet", *options], check=True)


def stopped_and_resumed(base: list[str], out: Path) -> str:
    """Stop a run once its first checkpoint is saved, then resume it; how the stop went."""
    command = [*base, "--out", str(out), "--quiet", "--checkpoint-every", "1"]
    run = subprocess.Popen(command, start_new_session=True)
    state = out / ".checkpoint" / "state.json"
    while not state.exists() and run.poll() is None:
        time.sleep(0.05)
    if run.poll() is not None:
        return "finished before its first checkpoint (use more --lines)"
    os.kill(run.pid, signal.SIGINT)
    status = run.wait()
    subprocess.run(["roberta-static", "distill", "--resume", str(out), "--quiet"], check=True)
    return f"stopped with exit {status}, resumed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=400, help="lines of the benchmark text")
    parser.add_argument("--model", default=None)
    parser.add_argument("--no-ray", action="store_true", help="leave the Ray engine out")
    parser.add_argument("--keep", type=Path, help="write the outputs here and keep them")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        corpus, vocab = root / "corpus.txt", root / "vocab.txt"
        write_corpus(corpus, lines=args.lines)
        vocab.write_text("\n".join(vocabulary_words(None)) + "\n")
        base = ["roberta-static", "distill", str(corpus), "--vocab", str(vocab)]
        base += ["--model", args.model or default_model(), "--device", "cpu"]
        print(f"corpus {corpus.stat().st_size:,} bytes ({args.lines} lines)")
        runs = [
            ("one process", []),
            ("--workers 2", ["--workers", "2"]),
            ("--engine ray --workers 2", ["--engine", "ray", "--workers", "2"]),
            ("--max-contexts 7", ["--max-contexts", "7"]),
            ("--max-contexts 7 --workers 2", ["--max-contexts", "7", "--workers", "2"]),
        ]
        if args.no_ray:
            runs = [run for run in runs if "ray" not in run[0]]
        for number, (name, options) in enumerate(runs):
            out = root / f"run{number}"
            start = time.perf_counter()
            distill(base, out, *options)
            seconds = time.perf_counter() - start
            hashes = f"{sha256(out / 'vectors.npy')}  {sha256(out / 'vocab.tsv')}"
            print(f"{name:32} {hashes}  {seconds:6.1f} s", flush=True)
        out = root / "stopped"
        how = stopped_and_resumed(base, out)
        hashes = f"{sha256(out / 'vectors.npy')}  {sha256(out / 'vocab.tsv')}"
        print(f"{'stopped and resumed':32} {hashes}  ({how})")


if __name__ == "__main__":
    main()
