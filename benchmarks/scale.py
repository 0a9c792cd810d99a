"""Corpora the size users bring: a folder of many small documents, a multi-gigabyte file.

Builds synthetic corpora from gensim's English text (the Wikipedia excerpt and the Lee
documents, see ``gensim_corpus.py``) in ``--work``, once:

- ``files:N``: a folder of N files of three lines each (news articles, posts: one file each);
- ``onefile:N``: the same bytes as ``files:N``, in one file (the rate to compare against);
- ``big:MB``: one plain file of about MB megabytes; ``bz2:MB``: the same, compressed;
- ``open:MB``: like ``big:MB``, each line ending in words never seen before (a real dump's
  vocabulary keeps growing: numbers, names, misspellings; the text above repeats);

and vocabularies of K entries (the corpus's words by frequency, then its two-word phrases).
The engines: ``serial`` (one process), ``workers`` (``--workers 2``), ``ray`` (``--engine ray
--workers 2``: on a cluster of this machine alone the driver encodes) and ``ray-actors`` (the
same with ``--encoders 1``: an encoder actor, as on a cluster of several machines).
Each run is ``distill`` in a fresh process with a near-free encoder (random weights, one layer,
32 wide, MiniLM's tokenizer: its arithmetic is negligible, so the run measures the engine) and
the default options (``max_contexts`` 2,000, so runs with workers count each shard first). It
prints, per corpus, vocabulary and engine: the seconds to the first batch summed (from the call
of ``distill``), model tokens per second over the pass, the peak memory of all the run's
processes together, sampled four times a second (PSS: pages shared by several processes, such as
the libraries each maps, divided among them; and the sum of their RSS, which counts such pages in
each), the checkpoint's size (the sums, and the rest: the state) and the longest time one took
to write. Then the targets of the issue "Real corpora on
every engine".

Run it from ``benchmarks/`` (``--small`` for a quick check; the full set takes hours on two
cores):

    python scale.py --work /tmp/scale
    python scale.py --work /tmp/scale --runs files:1000@100000,files:100000@100000 --engines workers
"""

from __future__ import annotations

import argparse
import bz2
import functools
import itertools
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extras import needs, packaged_model

LINES_PER_FILE = 3
NEW_WORD_KINDS = ("ref", "id", "no", "v", "x")  # an open vocabulary: five new words a line
FILES_PER_FOLDER = 1000  # files of a corpus folder are spread over subfolders of this many
SAMPLE_SECONDS = 0.25
# What the issue asks for: the large folders with the large vocabulary, the small vocabulary on
# the smallest and largest folders, and the same bytes as one file to compare rates with.
FULL = (
    "files:1000@1000,files:100000@1000,files:1000@100000,files:2000@100000,files:10000@100000,"
    "files:100000@100000,onefile:100000@100000,big:100@100000,big:1000@100000,bz2:1000@100000"
)
SMALL = "files:30@300,onefile:30@300"
ENGINES = "serial,workers,ray,ray-actors"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "rs-scale")
    parser.add_argument("--runs", help=f"CORPUS@ENTRIES, comma-separated (default: {FULL})")
    parser.add_argument("--engines", help=f"comma-separated (default: {ENGINES})")
    parser.add_argument("--max-contexts", type=int, default=None, help="default: distill's")
    parser.add_argument("--checkpoint-every", type=float, default=20.0, help="seconds")
    parser.add_argument("--small", action="store_true", help="a quick check of the script")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one run, in a child process
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run_one(json.loads(args.run))), flush=True)
        return
    runs = [spec.split("@") for spec in (args.runs or (SMALL if args.small else FULL)).split(",")]
    engines = (args.engines or ("serial,workers" if args.small else ENGINES)).split(",")
    if any(engine.startswith("ray") for engine in engines):
        with needs("ray", "or leave ray out of --engines"):
            import ray  # noqa: F401
    print(machine())
    results = []
    for (corpus, size), engine in itertools.product(runs, engines):
        entries = int(size)
        task = {
            **inputs(args.work, corpus, entries),
            "engine": engine,
            "max_contexts": args.max_contexts,
            "checkpoint_every": args.checkpoint_every,
            "out": str(args.work / f"out-{os.getpid()}"),  # scale.py's runs at once: one each
        }
        result = {"corpus": corpus, "entries": entries, "engine": engine, **measure(task)}
        results.append(result)
        print(row(result), flush=True)
    print()
    print(table(results))
    print()
    for line in targets(results):
        print(line)


def machine() -> str:
    """The CPU model and cores this ran on."""
    model = platform.processor() or "unknown CPU"
    try:
        found = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        model = found.group(1).strip() if found else model
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


def inputs(work: Path, corpus: str, entries: int) -> dict[str, str]:
    """A run's ``corpus``, ``vocab`` (of ``entries``) and near-free ``model``, built in ``work``
    unless they are there."""
    work.mkdir(parents=True, exist_ok=True)
    return {
        "corpus": str(build_corpus(work, corpus)),
        "vocab": str(build_vocabulary(work, entries)),
        "model": near_free_model(work),
    }


def near_free_model(work: Path) -> str:
    """The near-free encoder, built once in ``work`` (see ``feed.py``)."""
    from feed import build_near_free

    folder = work / "near-free"
    if not (folder / "config.json").exists():
        build_near_free(folder, 1, packaged_model("minilm"))
    return str(folder)


@functools.cache
def text_lines() -> list[str]:
    """gensim's English paragraphs, one per line."""
    from gensim_corpus import lee_documents, wiki_paragraphs

    return [*wiki_paragraphs(), *lee_documents()]


def build_corpus(work: Path, spec: str) -> Path:
    """The corpus ``spec`` names, written into ``work`` unless it is there."""
    kind, _, size = spec.partition(":")
    number = int(size)
    builders = {
        "files": _folder,
        "onefile": _one_file,
        "big": _big,
        "bz2": _compressed,
        "open": _open_vocabulary,
    }
    if kind not in builders:
        sys.exit(
            f"error: scale.py: unknown corpus {spec!r} "
            "(files:N, onefile:N, big:MB, bz2:MB, open:MB)"
        )
    return builders[kind](work, number)


def _documents(count: int) -> list[str]:
    """``count`` documents of ``LINES_PER_FILE`` lines, cycling through the text."""
    lines = itertools.cycle(text_lines())
    return ["".join(f"{next(lines)}\n" for _ in range(LINES_PER_FILE)) for _ in range(count)]


def _folder(work: Path, count: int) -> Path:
    folder = work / f"files-{count}"
    if not (folder / ".done").exists():
        for number, document in enumerate(_documents(count)):
            path = folder / f"{number // FILES_PER_FOLDER:04}" / f"{number:07}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(document, encoding="utf-8")
        (folder / ".done").touch()  # hidden: never read as corpus
    return folder


def _one_file(work: Path, count: int) -> Path:
    path = work / f"onefile-{count}.txt"
    if not path.exists():
        _write(path, _documents(count))
    return path


def _big(work: Path, megabytes: int) -> Path:
    return _lines_file(work / f"big-{megabytes}.txt", megabytes, lambda number: "")


def _open_vocabulary(work: Path, megabytes: int) -> Path:
    def new_words(number: int) -> str:
        return " " + " ".join(f"{kind}{number:x}" for kind in NEW_WORD_KINDS) + "."

    return _lines_file(work / f"open-{megabytes}.txt", megabytes, new_words)


def _lines_file(path: Path, megabytes: int, ending: Callable[[int], str]) -> Path:
    """gensim's lines, each with ``ending(its number)``, up to about ``megabytes``."""
    if not path.exists():
        text, size, parts = text_lines(), 0, []
        for number, line in enumerate(itertools.cycle(text)):
            parts.append(f"{line}{ending(number)}\n")
            size += len(parts[-1].encode())
            if size >= megabytes * 1_000_000:
                break
            if len(parts) >= 10_000:
                _write(path, parts, mode="a")
                parts = []
        _write(path, parts, mode="a")
    return path


def _compressed(work: Path, megabytes: int) -> Path:
    path = work / f"big-{megabytes}.txt.bz2"
    if not path.exists():
        plain = _big(work, megabytes)
        with open(plain, "rb") as source, bz2.open(f"{path}.part", "wb", compresslevel=1) as out:
            while block := source.read(1 << 24):
                out.write(block)
        os.replace(f"{path}.part", path)
    return path


def _write(path: Path, parts: list[str], mode: str = "w") -> None:
    with open(path, mode, encoding="utf-8") as handle:
        handle.writelines(parts)


def build_vocabulary(work: Path, entries: int) -> Path:
    """``entries`` entries of the text: its words by frequency, then its two-word phrases."""
    path = work / f"vocab-{entries}.txt"
    if path.exists():
        return path
    words: Counter[str] = Counter()
    phrases: Counter[str] = Counter()
    for line in text_lines():
        tokens = re.findall(r"[A-Za-z][a-z]+", line)
        words.update(token.lower() for token in tokens)
        phrases.update(f"{a} {b}".lower() for a, b in itertools.pairwise(tokens))
    chosen = [word for word, _ in words.most_common(entries)]
    chosen += [phrase for phrase, _ in phrases.most_common(entries - len(chosen))]
    path.write_text("".join(f"{entry}\n" for entry in chosen[:entries]), encoding="utf-8")
    return path


def measure(task: dict[str, Any]) -> dict[str, Any]:
    """One run in a fresh process, with the peak memory of its whole process tree."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, __file__, "--run", json.dumps(task)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
    )
    peak_rss = peak_pss = 0
    while child.poll() is None:
        rss, pss = tree_memory(child.pid)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(SAMPLE_SECONDS)
    out, err = child.communicate()
    peaks = {"wall": time.perf_counter() - started, "peak_rss": peak_rss, "peak_pss": peak_pss}
    if child.returncode:
        last = err.strip().splitlines()[-1] if err.strip() else f"exit {child.returncode}"
        return {"failed": last, **peaks}
    return {**json.loads(out.strip().splitlines()[-1]), **peaks}


def tree_memory(root: int) -> tuple[int, int]:
    """Bytes resident in ``root`` and every process descended from it, now: the sum of their
    RSS (pages shared by several processes counted in each) and of their PSS (shared pages
    divided among the processes that share them: what they take together)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    rss = pss = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        stack += children.get(pid, [])
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        found = dict(re.findall(r"^(Rss|Pss):\s+(\d+) kB", rollup, re.MULTILINE))
        rss += int(found.get("Rss", 0)) * 1024
        pss += int(found.get("Pss", 0)) * 1024
    return rss, pss


def run_one(task: dict[str, Any]) -> dict[str, Any]:
    """In the child: ``distill`` over the task's corpus, timing its first batch and checkpoints."""
    import shutil

    from roberta_static import DistillConfig, distill
    from roberta_static.engine import checkpoint
    from roberta_static.progress import Progress
    from roberta_static.stopping import Checkpointing

    out = Path(task["out"])
    shutil.rmtree(out, ignore_errors=True)
    options: dict[str, Any] = {"model": task["model"], "layers": "1"}
    if task["max_contexts"] is not None:
        options["max_contexts"] = task["max_contexts"]
    engine = task["engine"]
    options |= {"serial": {"workers": 1}, "workers": {"workers": 2}}.get(engine, {})
    if engine.startswith("ray"):  # on this machine the driver encodes, unless given actors
        options |= {
            "engine": "ray",
            "workers": 2,
            "encoders": 1 if engine == "ray-actors" else None,
        }
    saves: list[tuple[float, int, int]] = []  # seconds, bytes in all, bytes of the sums
    save = checkpoint.save_checkpoint

    def timed_save(folder: Path, saved: Any) -> Path:
        begun = time.perf_counter()
        target = save(folder, saved)
        seconds = time.perf_counter() - begun
        sizes = {path.name: path.stat().st_size for path in target.iterdir()}
        sums = sum(size for name, size in sizes.items() if name in ("sums.npy", "rows.npy"))
        saves.append((seconds, sum(sizes.values()), sums))
        return target

    checkpoint.save_checkpoint = timed_save
    first: list[float] = []
    called = time.perf_counter()

    def report(progress: Any) -> None:
        if not first and isinstance(progress, Progress) and progress.tokens:
            first.append(time.perf_counter() - called)

    checkpointing = Checkpointing(out, task["checkpoint_every"])
    vectors = distill(
        task["corpus"], task["vocab"], DistillConfig(**options), report, checkpointing
    )
    stats = vectors.meta["stats"]
    return {
        "first_batch": first[0] if first else None,
        "tokens": stats["tokens"],
        "pass_seconds": stats["seconds"],
        "rate": stats["tokens"] / max(stats["seconds"], 1e-9),
        "saves": len(saves),
        "save_seconds": max((s for s, _, _ in saves), default=None),
        "checkpoint_bytes": max((b for _, b, _ in saves), default=None),
        "state_bytes": max((b - sums for _, b, sums in saves), default=None),
    }


def row(result: dict[str, Any]) -> str:
    """One result as a line of the table."""
    name = f"{result['corpus']:<16} {result['entries']:>7,} {result['engine']:<10}"
    if "failed" in result:
        return f"{name} FAILED after {result['wall']:.0f} s: {result['failed']}"
    first = result["first_batch"]
    checkpoint = "-"
    if result["checkpoint_bytes"] is not None:
        checkpoint = (
            f"{result['checkpoint_bytes'] / 1e6:7.1f} MB (state {result['state_bytes'] / 1e6:.2f} "
            f"MB), {result['save_seconds']:.2f} s"
        )
    return (
        f"{name} {first if first is None else round(first, 1)!s:>7} "
        f"{result['rate']:>11,.0f} {result['peak_pss'] / 1e9:8.2f} {result['peak_rss'] / 1e9:8.2f} "
        f"{result['wall']:7.0f}  "
        f"{checkpoint}"
    )


def table(results: list[dict[str, Any]]) -> str:
    header = (
        f"{'corpus':<16} {'entries':>7} {'engine':<10} {'first s':>7} {'tokens/s':>11} "
        f"{'PSS GB':>8} {'RSS GB':>8} {'wall s':>7}  checkpoint (largest), longest write"
    )
    return "\n".join([header, *(row(result) for result in results)])


def targets(results: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, for the runs this invocation made."""
    found = {(r["corpus"], r["entries"], r["engine"]): r for r in results if "failed" not in r}
    return [*_many_files(found), *_memory_growth(found), *_workers_on_2000(found)]


Found = dict[tuple[str, int, str], dict[str, Any]]


def _many_files(found: Found) -> list[str]:
    """Each folder's peak memory, and its rate against the same bytes in one file."""
    lines = []
    for (corpus, entries, engine), result in sorted(found.items()):
        alone = found.get((corpus.replace("files:", "onefile:"), entries, engine))
        if corpus.startswith("files:") and alone is not None:
            lines.append(
                f"{corpus} x {entries:,} entries, {engine}: {result['peak_pss'] / 1e9:.2f} GB "
                f"peak (PSS; target < 2), rate {result['rate'] / alone['rate']:.2f}x the same bytes "
                "as one file (target >= 0.8)"
            )
    return lines


def _memory_growth(found: Found) -> list[str]:
    """Peak memory of the smallest and largest folder, and file, of each engine."""
    lines = []
    for engine in sorted({key[2] for key in found}):
        for kind, what, target in (("files", "files", "<= 1.2"), ("big", "MB file", "the same")):
            sizes = sorted(
                (int(corpus.split(":")[1]), entries, result)
                for (corpus, entries, eng), result in found.items()
                if eng == engine and corpus.startswith(f"{kind}:")
            )
            sizes = [size for size in sizes if size[1] == max(s[1] for s in sizes)]
            if len(sizes) > 1:
                (small, _, first), (large, _, last) = sizes[0], sizes[-1]
                growth = last["peak_pss"] / first["peak_pss"]
                lines.append(
                    f"{engine}: peak memory {growth:.2f}x from {small:,} to {large:,} {what} "
                    f"(target {target})"
                )
    return lines


def _workers_on_2000(found: Found) -> list[str]:
    """Two workers against one process on the 2,000-file folder."""
    lines = []
    for corpus, entries, engine in sorted(found):
        if (
            corpus == "files:2000"
            and engine == "serial"
            and (two := found.get((corpus, entries, "workers")))
        ):
            share = two["rate"] / found[corpus, entries, engine]["rate"]
            lines.append(
                f"{corpus} x {entries:,}: --workers 2 at {share:.2f}x one process's rate (target >= 1)"
            )
    return lines


if __name__ == "__main__":
    main()
