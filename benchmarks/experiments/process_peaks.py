"""Which process of a run holds its memory, and when: each process's PSS over a scale.py run.

Runs one of ``scale.py``'s runs (its corpus, the 100,000-entry vocabulary, the near-free encoder,
a checkpoint every 20 s) in a fresh process, samples the PSS of every process of its tree four
times a second, and prints, for each ``--every`` seconds, the sample with the largest total and
each process's share in it; then the run's peak and its split. A process is named by what it is:
the main process, the forkserver, the resource tracker, a worker (a child of the forkserver), or
Ray's name for it (``ray::...``, ``raylet``, ``gcs_server``).

Usage: python benchmarks/experiments/process_peaks.py --work /tmp/scale --corpus files:100000
    --engine workers [--every 10]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCHMARKS))  # scale.py's corpus and model

SAMPLE_SECONDS = 0.25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="scale.py's work folder")
    parser.add_argument("--corpus", default="files:100000", help="a scale.py corpus")
    parser.add_argument("--engine", default="workers", help="a scale.py engine")
    parser.add_argument("--every", type=float, default=10, help="seconds between lines")
    args = parser.parse_args()
    from scale import inputs

    task = {
        **inputs(args.work, args.corpus, 100_000),
        "engine": args.engine,
        "max_contexts": None,
        "checkpoint_every": 20.0,
        "out": str(args.work / "out" / "process_peaks"),
    }
    child = subprocess.Popen(
        [sys.executable, str(BENCHMARKS / "scale.py"), "--run", json.dumps(task)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
    )
    started = time.perf_counter()
    peak: tuple[int, float, dict[str, int]] = (0, 0.0, {})
    window = peak
    line_at = args.every
    while child.poll() is None:
        now = time.perf_counter() - started
        split = process_split(child.pid)
        total = sum(split.values())
        peak, window = max(peak, (total, now, split)), max(window, (total, now, split))
        if now >= line_at:
            print(_line(*window), flush=True)
            window, line_at = (0, 0.0, {}), line_at + args.every
        time.sleep(SAMPLE_SECONDS)
    print(f"exit {child.returncode}; peak {_line(*peak)}")


def process_split(root: int) -> dict[str, int]:
    """The PSS in MB of ``root`` and of each process below it, by name (see the module's)."""
    parents, commands = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):  # ended meanwhile
            continue
        pid = int(stat.parent.name)
        parents[pid], commands[pid] = int(fields[1]), command
    split: dict[str, int] = {}
    below = [(root, "main")]
    while below:
        pid, name = below.pop()
        below += [(child, _name(commands[child], name)) for child, p in parents.items() if p == pid]
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        found = re.search(r"^Pss:\s+(\d+)", rollup, re.MULTILINE)
        label, number = name, 1
        while label in split:
            number += 1
            label = f"{name} {number}"
        split[label] = round(int(found.group(1)) / 1024) if found else 0
    return split


def _name(command: str, parent: str) -> str:
    words = command.split()
    if parent == "forkserver":  # forked from it, so with its command line
        return "worker"
    if "forkserver" in command:
        return "forkserver"
    if "resource_tracker" in command:
        return "resource tracker"
    if words and words[0] in ("ray::IDLE", "ray::count_shard", "ray::produce_shard"):
        return "ray worker"  # a Ray worker is named after the task it runs
    program = Path(words[0]).name if words else "?"
    if program.startswith("python"):  # Ray's own processes are Python scripts
        program = next((Path(word).name for word in words[1:] if word.endswith(".py")), program)
    return program


def _line(total: int, seconds: float, split: dict[str, int]) -> str:
    parts = ", ".join(f"{name} {mb}" for name, mb in sorted(split.items(), key=lambda i: -i[1]))
    return f"{seconds:5.0f} s  {total:5d} MB: {parts}"


if __name__ == "__main__":
    main()
