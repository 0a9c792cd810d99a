"""The main process's C heap over a pass with worker processes, by glibc's mmap threshold.

Runs ``distill`` with ``--workers 2`` over ``scale.py``'s folder of ``--files`` files with a
100,000-entry vocabulary and its near-free encoder, for ``--seconds`` each, once with glibc's
own (dynamic) threshold and once with ``MALLOC_MMAP_THRESHOLD_=131072``, each in a fresh process.
Every ``--every`` seconds it prints the main process's heap from glibc's ``mallinfo2`` (its
arenas, the bytes in use, the bytes free in them) and the PSS of the main process and of each
process it started. ``--threshold`` runs one of the two; ``--checkpoint-every S`` writes a
checkpoint every S seconds, as ``scale.py`` does (by default none is written).

Usage: python benchmarks/experiments/heap_threshold.py --work /tmp/scale [--files 100000]
    [--seconds 180] [--every 20] [--threshold own|fixed] [--checkpoint-every 20]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scale.py's corpus and model

THRESHOLDS = {"own": ("glibc's own", None), "fixed": ("fixed at 128 KiB", "131072")}


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="scale.py's work folder")
    parser.add_argument("--files", type=int, default=100_000, help="scale.py's files:N corpus")
    parser.add_argument("--seconds", type=float, default=180, help="of each run")
    parser.add_argument("--every", type=float, default=20, help="seconds between samples")
    parser.add_argument(
        "--threshold", choices=THRESHOLDS, help="default: both, one after the other"
    )
    parser.add_argument("--checkpoint-every", type=float, default=0, help="seconds (0: none)")
    args = parser.parse_args()
    from scale import inputs

    task = {
        **inputs(args.work, f"files:{args.files}", 100_000),
        "every": args.every,
        "checkpoint_every": args.checkpoint_every,
        "out": str(args.work / "out" / "heap_threshold"),
    }
    for name, threshold in [THRESHOLDS[args.threshold]] if args.threshold else THRESHOLDS.values():
        env = dict(os.environ)
        if threshold is not None:
            env["MALLOC_MMAP_THRESHOLD_"] = threshold
        print(f"threshold {name}", flush=True)
        child = subprocess.Popen(
            [sys.executable, __file__, "--run", json.dumps(task)], env=env, start_new_session=True
        )
        try:
            child.wait(timeout=args.seconds)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, 9)  # the run and its workers
            child.wait()
        shutil.rmtree(task["out"], ignore_errors=True)


def run(task: dict[str, Any]) -> None:
    """In the child: the pass, sampled by a thread until the parent ends it."""
    from roberta_static import DistillConfig, distill
    from roberta_static.stopping import Checkpointing

    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = _MallInfo2
    started = time.perf_counter()

    def sample() -> None:
        while True:
            time.sleep(float(task["every"]))
            info = mallinfo2()
            below = [_pss_mb(pid) for pid in _children()]
            print(
                f"  {time.perf_counter() - started:4.0f} s  heap {info.arena / 1e6:4.0f} MB "
                f"(in use {info.uordblks / 1e6:4.0f}, free {info.fordblks / 1e6:4.0f})  "
                f"PSS main {_pss_mb('self'):4.0f} MB, started {sorted(below, reverse=True)}",
                flush=True,
            )

    threading.Thread(target=sample, daemon=True).start()
    every = task["checkpoint_every"]
    distill(
        task["corpus"],
        task["vocab"],
        DistillConfig(model=task["model"], layers="1", workers=2),
        checkpointing=Checkpointing(Path(task["out"]), every) if every else None,
    )


def _children(pid: int | str = "self") -> list[int]:
    """Every process below ``pid`` (the workers are the forkserver's children, not this one's)."""
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            pids = [int(child) for child in children.read_text().split()]
        except OSError:  # ended meanwhile
            continue
        for child in pids:
            found += [child, *_children(child)]
    return found


def _pss_mb(pid: int | str) -> int:
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return round(int(re.search(r"^Pss:\s+(\d+)", rollup, re.M).group(1)) / 1e3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--run":
        import warnings

        warnings.simplefilter("ignore")  # the entries not found: the same in every run
        run(json.loads(sys.argv[2]))
    else:
        main()
