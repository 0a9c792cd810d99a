"""One process's resident memory over a pass, by how often it hands its free heap back.

Runs ``distill`` in one process over a plain file of ``--megabytes`` of gensim's text with a
100,000-entry vocabulary and ``scale.py``'s near-free encoder, once per trim interval (``never``:
no ``malloc_trim`` at all), each in a fresh process, and prints the lowest and highest resident
memory (RSS, sampled four times a second) in each 10-second window, and the peak.

Usage: python benchmarks/experiments/heap_trim.py --work /tmp/scale [--megabytes 40]
    [--intervals never,10,2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scale.py's corpus and model

WINDOW_SECONDS = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="scale.py's work folder")
    parser.add_argument("--megabytes", type=int, default=40)
    parser.add_argument("--intervals", default="never,10,2")
    args = parser.parse_args()
    from scale import inputs

    task = inputs(args.work, f"big:{args.megabytes}", 100_000)
    for interval in args.intervals.split(","):
        run = subprocess.run(
            [sys.executable, __file__, "--run", json.dumps({**task, "interval": interval})],
            capture_output=True,
            text=True,
            check=True,
        )
        print(f"trim every {interval} s" if interval != "never" else "no trim")
        print(run.stdout, end="", flush=True)


def run(task: dict[str, str]) -> None:
    """In the child: the pass, with RSS sampled by a thread."""
    from roberta_static import DistillConfig, distill
    from roberta_static.engine import heap

    if task["interval"] == "never":
        heap._malloc_trim = None
    else:
        heap.TRIM_SECONDS = float(task["interval"])
    samples: list[tuple[float, float]] = []
    started = time.perf_counter()

    def sample() -> None:
        while True:
            samples.append((time.perf_counter() - started, _rss_mb()))
            time.sleep(0.25)

    threading.Thread(target=sample, daemon=True).start()
    config = DistillConfig(model=task["model"], layers="1", workers=1)
    distill(task["corpus"], task["vocab"], config)
    seconds = time.perf_counter() - started
    for start in range(0, int(seconds), WINDOW_SECONDS):
        window = [rss for at, rss in samples if start <= at < start + WINDOW_SECONDS]
        if window:
            print(f"  {start:4d} s  RSS {min(window):5.0f} to {max(window):5.0f} MB")
    print(f"  peak {max(rss for _, rss in samples):.0f} MB, {seconds:.0f} s")


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--run":
        import warnings

        warnings.simplefilter("ignore")  # the entries not found: the same in every run
        run(json.loads(sys.argv[2]))
    else:
        main()
