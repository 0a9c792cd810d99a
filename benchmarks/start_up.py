"""A run as a user's script makes it: ``distill()`` in a fresh process, the model's load included.

With ``--workers N`` the worker processes start while the model loads (issue 25): their start-up
(spaCy's imports) is spent beside the load instead of at the start of the pass. ``feed.py`` hands
``distill_from_model`` a loaded model, so it cannot show that; this benchmark times the whole call.

For each worker count it prints the wall time of ``distill()`` (imports of torch and transformers,
the model's load, the pass) and the pass's ``stats.seconds`` (from the loaded model on), with the
model tokens/s of the pass. Rounds alternate the order of the runs. With ``--against TREE``,
another checkout of this repository, each run is also made with that tree's library, in the same
rounds, so a change is compared under the same machine load.

Input, as ``feed.py``: gensim's Wikipedia excerpt + lee_background.cor, two copies (``--copies``,
``--lines``), the SimLex-999 + WordSim-353 words, ``--max-contexts 0``, the near-free 1-layer
encoder (``--model`` for another one, e.g. MiniLM's folder).

Usage: python benchmarks/start_up.py [--workers 1,2] [--repeat 3] [--against TREE] [--model M]
       [--copies 2] [--lines N] [--max-contexts 0] [--corpus FILE] [--vocab FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from feed import add_input_options, build_near_free, check_input_options, count_list
from throughput import default_model, hardware, positive, vocabulary_words, write_corpus


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """One ``distill()`` in this process, timed from the call (the model's load included)."""
    start = time.perf_counter()
    import roberta_static
    from roberta_static import DistillConfig, distill

    config = DistillConfig(
        model=task["model"], workers=task["workers"], max_contexts=task["max_contexts"]
    )
    vectors = distill(task["corpus"], task["vocab"], config)
    stats = vectors.meta["stats"]
    wall = time.perf_counter() - start
    tree = str(Path(roberta_static.__file__).parents[1])
    return {"wall": wall, "seconds": stats["seconds"], "tokens": stats["tokens"], "tree": tree}


def measure(task: dict[str, Any], tree: str | None) -> dict[str, Any]:
    """One run in a fresh process, with ``tree``'s library first on the path if given."""
    env = {**os.environ, **({"PYTHONPATH": tree} if tree else {})}
    done = subprocess.run(
        [sys.executable, __file__, "--task", json.dumps(task)],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent,
    )
    if done.returncode:
        sys.exit(f"{label(task, tree)} failed:\n{done.stderr}")
    run = json.loads(done.stdout.strip().splitlines()[-1])
    if tree and run["tree"] != tree:  # an installed copy of the library came first
        sys.exit(f"{label(task, tree)}: ran the library in {run['tree']}, not {tree}")
    return run


def label(task: dict[str, Any], tree: str | None) -> str:
    workers = "one process" if task["workers"] == 1 else f"--workers {task['workers']}"
    return f"{workers}, {Path(tree).name if tree else 'this tree'}"


def describe(run: dict[str, Any]) -> str:
    rate = run["tokens"] / run["seconds"]
    return (
        f"distill() {run['wall']:6.2f} s (model load included)   pass {run['seconds']:6.2f} s"
        f"  {rate:9,.0f} model tokens/s"
    )


def arguments() -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=count_list, default="1,2", help="1: one process")
    parser.add_argument("--repeat", type=positive(int), default=3, help="rounds")
    parser.add_argument("--against", help="another checkout of this repository to compare with")
    parser.add_argument("--model", help="a model folder instead of the near-free encoder")
    add_input_options(parser)
    args = parser.parse_args()
    if args.against and not (Path(args.against) / "roberta_static").is_dir():
        parser.error(f"argument --against: {args.against} holds no roberta_static package")
    check_input_options(parser, args)
    return args


def main() -> None:
    args = arguments()
    if args.task:
        print(json.dumps(run_task(json.loads(args.task))))
        return
    trees = [None, *([str(Path(args.against).resolve())] if args.against else [])]
    print(f"hardware: {hardware()}; load average {os.getloadavg()[0]:.2f}")
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpus, vocab = Path(tmp) / "corpus.txt", Path(tmp) / "vocab.txt"
        write_corpus(corpus, repeat=args.copies, lines=args.lines, corpus=args.corpus)
        vocab.write_text("\n".join(vocabulary_words(args.vocab)) + "\n")
        model = args.model or build_near_free(Path(tmp) / "near-free-1", 1, default_model())
        print(
            f"corpus {corpus.stat().st_size / 1e6:.2f} MB; model {args.model or 'near-free, 1 layer'}"
        )
        for round_ in range(args.repeat):
            pairs = [(workers, tree) for workers in args.workers for tree in trees]
            for workers, tree in pairs if round_ % 2 == 0 else pairs[::-1]:
                task = {"model": model, "workers": workers, "max_contexts": args.max_contexts}
                task |= {"corpus": str(corpus), "vocab": str(vocab)}
                run = measure(task, tree)
                runs.setdefault(label(task, tree), []).append(run)
                print(f"{label(task, tree):40} {describe(run)}", flush=True)
    print(f"\nmedians of {args.repeat} rounds:")
    for name, found in runs.items():
        wall = statistics.median(run["wall"] for run in found)
        seconds = statistics.median(run["seconds"] for run in found)
        print(f"{name:40} distill() {wall:6.2f} s   pass {seconds:6.2f} s")


if __name__ == "__main__":
    main()
