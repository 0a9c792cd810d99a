"""bfloat16, int8 and other CPU forward options against float32, side by side: speed and scores.

For MiniLM (the offline all-MiniLM-L6-v2) and a random-weight roberta-base (``RobertaConfig()``
defaults, a byte-level BPE trained on the text, as ``throughput.py --random-roberta-base`` builds
it), runs ``roberta-static distill`` over the first ``--lines`` lines of gensim's Wikipedia + Lee
text with the SimLex-999 + WordSim-353 vocabulary (1,341 words): one process per run, each
variant once per round for ``--rounds`` rounds, in turn, so the machine's drift hits all alike.
For each: the pass (meta.json seconds), model tokens/s, the whole command's wall time, SimLex /
WordSim Spearman x 100 (the library's ``evaluate``) and each entry's cosine against the float32
run of its round (median, minimum). Then both tables of targets of the issue "Use the hardware
it runs on", each met or not, with the CPU model, its flags and what ``--dtype auto`` picks here.

A variant is pieces joined by ``+`` (``bfloat16+freeze``), float32 unless a dtype is named:
  float32, auto, bfloat16   --dtype
  int8                      --quantize int8: linear layers in int8 (dynamic, per-channel weights),
                            those that narrow their input (the down-projections) in float32
  int8-all                  every linear layer in int8, the down-projections too
  compile                   the forward through torch.compile (inductor, dynamic shapes)
  freeze                    the same with inductor's freezing (weights folded, prepacked for oneDNN)
  threads1                  torch held to one thread (the producer thread keeps the other core)
  onednn1024                oneDNN's kernel caches at their libraries' size (1,024 shapes each)
  mmap128k                  glibc's mmap threshold fixed at 128 KiB (MALLOC_MMAP_THRESHOLD_)
  workers2                  --workers 2 (the producer in two processes)
  budgetN                   --batch-tokens N (length-bucketed batches of N tokens)
Pieces that are no option of ``distill`` (compile, freeze, int8-all) are patched into the run's
process. On a machine others share, the command's CPU seconds (user + system) say more than the
wall times: they grow far less when the cores are taken by others.

Usage: python benchmarks/bf16_cpu.py [--lines 3000] [--rounds 2] [--models minilm,roberta-base]
       [--variants LIST] [--roberta-variants LIST]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from child_run import run_measured

DTYPES = ("float32", "auto", "bfloat16")
MINILM_VARIANTS = (
    "float32,auto,bfloat16,int8,compile,freeze,bfloat16+freeze,threads1,budget2048,budget32768"
)
ROBERTA_VARIANTS = "float32,auto,bfloat16"
PATCHES = ("compile", "freeze", "int8-all")
OPTIONS = {"int8": ["--quantize", "int8"], "workers2": ["--workers", "2"]}
ENVIRONMENTS = {
    "threads1": [("OMP_NUM_THREADS", "1")],
    # oneDNN's and ideep's own kernel cache sizes, which distill otherwise holds to 16 shapes
    "onednn1024": [("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "1024"), ("LRU_CACHE_CAPACITY", "1024")],
    # glibc's threshold fixed: every buffer past it is mapped and unmapped, none left in the heap
    "mmap128k": [("MALLOC_MMAP_THRESHOLD_", "131072")],
}
FLAGS = (
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)
# The issue's targets: a CPU with bfloat16 units (auto), and the best kept option of the rest.
AUTO_SPEEDUP, AUTO_POINTS, AUTO_COSINE = 2.5, 0.3, 0.999
OPTION_RATE, OPTION_POINTS = 30_000, 0.5


@dataclass(frozen=True)
class Variant:
    """One way to run ``distill``: its options, environment and in-process patches."""

    name: str
    options: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    patches: tuple[str, ...] = ()


def parse_variant(name: str) -> Variant:
    """The variant ``name`` spells (see the module docstring)."""
    dtype, options, env, patches = "float32", [], [], []
    for piece in name.split("+"):
        if piece in DTYPES:
            dtype = piece
        elif piece in PATCHES:
            patches.append(piece)
        elif piece in OPTIONS:
            options += OPTIONS[piece]
        elif piece in ENVIRONMENTS:
            env += ENVIRONMENTS[piece]
        elif piece.startswith("budget") and piece[6:].isdigit():
            options += ["--batch-tokens", piece[6:]]
        else:
            raise argparse.ArgumentTypeError(f"unknown variant piece {piece!r} in {name!r}")
    return Variant(name, ("--dtype", dtype, *options), tuple(env), tuple(patches))


def parse_variants(text: str) -> list[Variant]:
    """Comma-separated variants, float32 first (every cosine is taken against it)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    return [parse_variant(name) for name in ["float32", *(n for n in names if n != "float32")]]


@dataclass
class Runs:
    """One variant's runs on one model, a value per round."""

    variant: Variant
    dtype: str = ""
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    cosines: list[Any] = field(default_factory=list)
    identical: bool = True
    failed: str | None = None

    @property
    def cosine(self) -> tuple[float, float]:
        """Median and minimum of the entries' cosines against float32, over every round."""
        import numpy as np

        values = np.concatenate(self.cosines)
        return float(np.median(values)), float(values.min())


def child(patches: list[str], argv: list[str]) -> None:
    """Run ``roberta-static ARGV`` in this process with ``patches`` applied to the encoder."""
    import torch

    from roberta_static.cli import main
    from roberta_static.model import encoder

    if "freeze" in patches:
        torch._inductor.config.freezing = True
    if patches:
        built = encoder.Encoder.__init__

        def patched(self: Any, *args: Any, **kwargs: Any) -> None:
            built(self, *args, **kwargs)
            if "int8-all" in patches:
                from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

                every = {torch.nn.Linear: per_channel_dynamic_qconfig}
                self.model = quantize_dynamic(self.model, every, dtype=torch.qint8)
            if "compile" in patches or "freeze" in patches:
                self.model = torch.compile(self.model, dynamic=True)

        encoder.Encoder.__init__ = patched
    sys.argv = ["roberta-static", *argv]
    main()


def run_once(variant: Variant, model: str, corpus: Path, vocab: Path, out: Path) -> Any:
    """One ``distill`` in its own process: the vectors, and how the process ran."""
    from roberta_static import StaticVectors

    argv = ["distill", str(corpus), "--vocab", str(vocab), "--model", model, "--out", str(out)]
    argv += ["--overwrite", "--quiet", *variant.options]
    if variant.patches:
        command = [sys.executable, __file__, "--child", ",".join(variant.patches), "--", *argv]
    else:
        command = [sys.executable, "-m", "roberta_static", *argv]
    finished = run_measured(command, {**os.environ, **dict(variant.env)})
    if finished.exit_code:
        lines = finished.output.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit status {finished.exit_code}")
    return StaticVectors.load(out), finished


def scores(vectors: Any) -> dict[str, float]:
    """Spearman x 100 on each dataset, as ``roberta-static evaluate`` computes it."""
    from quality import DATASETS

    from roberta_static.quality.evaluate import dataset_path, evaluate_pairs

    keyed = vectors.to_keyed_vectors()
    return {d: evaluate_pairs(keyed, dataset_path(d)[1], True, d).spearman for d in DATASETS}


def measure(model: str, variants: list[Variant], rounds: int, folder: Path) -> list[Runs]:
    """Every variant once a round, in turn; cosines against the round's float32 vectors."""
    import numpy as np
    from throughput import word_cosines

    corpus, vocab, out = folder / "corpus.txt", folder / "vocab.txt", folder / "out"
    results = [Runs(variant) for variant in variants]
    for round_number in range(rounds):
        reference = None
        for runs in results:
            if runs.failed:
                continue
            try:
                vectors, finished = run_once(runs.variant, model, corpus, vocab, out)
            except RuntimeError as error:
                runs.failed = str(error)
                print(f"  {runs.variant.name}: failed: {error}", flush=True)
                continue
            reference = vectors if reference is None else reference
            stats = vectors.meta["stats"]
            runs.dtype = vectors.meta["model"]["dtype"]
            runs.wall.append(finished.wall)
            runs.cpu.append(finished.cpu)
            runs.peak.append(finished.peak_bytes / 2**30)
            runs.seconds.append(stats["seconds"])
            runs.rates.append(stats["tokens"] / stats["seconds"])
            runs.scores = runs.scores or scores(vectors)
            runs.cosines.append(word_cosines(reference, vectors))
            runs.identical &= np.array_equal(reference.vectors, vectors.vectors)
            print(
                f"  round {round_number + 1} {runs.variant.name}: {stats['seconds']:.1f} s pass, "
                f"{runs.rates[-1]:,.0f} model tokens/s, {finished.wall:.1f} s command "
                f"({finished.cpu:.1f} CPU s), peak {runs.peak[-1]:.2f} GB",
                flush=True,
            )
    return results


def ratio(runs: Runs, base: Runs, what: str) -> float:
    """How many times faster ``runs`` is than ``base``: mean time ``what`` over the rounds."""
    return statistics.mean(getattr(base, what)) / statistics.mean(getattr(runs, what))


def table(title: str, results: list[Runs]) -> None:
    """The variants side by side, a value per round where it varies by round."""
    base = results[0]
    names = list(base.scores)
    print(f"\n{title}\n")
    print(
        "| variant | dtype | pass (meta.json s) | model tokens/s | whole command s | CPU s | "
        f"peak RSS GB | {' / '.join(names)} | change | cosine to float32 (median, min) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for runs in results:
        if runs.failed:
            print(f"| {runs.variant.name} | failed: {runs.failed} | | | | | | | | |")
            continue
        change = " / ".join(f"{runs.scores[n] - base.scores[n]:+.2f}" for n in names)
        median, least = runs.cosine
        print(
            f"| {runs.variant.name} | {runs.dtype} | {_each(runs.seconds, '.1f')} | "
            f"{_each(runs.rates, ',.0f')} | {_each(runs.wall, '.1f')} | {_each(runs.cpu, '.1f')} | "
            f"{_each(runs.peak, '.2f')} | {' / '.join(f'{runs.scores[n]:.2f}' for n in names)} | "
            f"{change} | {median:.5f}, {least:.5f} |"
        )


def _each(values: list[float], spec: str) -> str:
    return ", ".join(format(value, spec) for value in values)


def auto_targets(results: list[Runs]) -> None:
    """Table 1 of the targets: ``--dtype auto`` against float32."""
    by_name = {runs.variant.name: runs for runs in results if not runs.failed}
    base, auto = by_name.get("float32"), by_name.get("auto")
    if base is None or auto is None:
        print("target 1: needs the float32 and auto variants")
        return
    speedup = ratio(auto, base, "wall")
    change = max(abs(auto.scores[n] - base.scores[n]) for n in base.scores)
    median, _ = auto.cosine
    print(f"\nTarget 1, --dtype auto (here: {auto.dtype}) against float32, end to end:")
    if auto.dtype == "float32":
        print(
            f"  no bfloat16 units: auto must be exactly float32, no slowdown. Vectors identical: "
            f"{'yes' if auto.identical else 'NO'}; whole command {speedup:.2f}x, pass "
            f"{ratio(auto, base, 'seconds'):.2f}x of float32's speed (the same run twice: the "
            f"spread is the machine's) -> {'met' if auto.identical else 'NOT met'}"
        )
        return
    met = speedup >= AUTO_SPEEDUP and change <= AUTO_POINTS and median >= AUTO_COSINE
    print(
        f"  whole command {speedup:.2f}x (target >= {AUTO_SPEEDUP}x), pass "
        f"{ratio(auto, base, 'seconds'):.2f}x; largest score change {change:.2f} points "
        f"(target <= {AUTO_POINTS}); cosine median {median:.5f} (target >= {AUTO_COSINE}) -> "
        f"{'met' if met else 'NOT met'}"
    )


def option_targets(results: list[Runs]) -> None:
    """Table 2 of the targets: the other options, and the fastest that holds the scores."""
    base = results[0]
    print("\nTarget 2, the CPU options against float32 (scores within 0.5 points):\n")
    print(
        "| variant | model tokens/s | x float32 (pass) | x float32 (CPU s) | largest score change "
        "| holds |"
    )
    print("|---|---|---|---|---|---|")
    holding = []
    for runs in results[1:]:
        if runs.failed or runs.variant.name in DTYPES:
            continue
        change = max(abs(runs.scores[n] - base.scores[n]) for n in base.scores)
        holds = change <= OPTION_POINTS
        holding += [runs] if holds else []
        print(
            f"| {runs.variant.name} | {statistics.mean(runs.rates):,.0f} | "
            f"{ratio(runs, base, 'seconds'):.2f}x | {ratio(runs, base, 'cpu'):.2f}x | "
            f"{change:.2f} | {'yes' if holds else 'no'} |"
        )
    best = max(holding, key=lambda runs: statistics.mean(runs.rates), default=None)
    if best is None:
        print("\n  no option holds the scores")
        return
    rate = statistics.mean(best.rates)
    print(
        f"\n  fastest that holds: {best.variant.name}, {rate:,.0f} model tokens/s (target >= "
        f"{OPTION_RATE:,} on 2 cores) -> {'met' if rate >= OPTION_RATE else 'NOT met'}"
    )


def machine() -> str:
    """The CPU model, cores and torch (``throughput.hardware``), and the flags that matter here."""
    from throughput import hardware

    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as info:
            line = next((line for line in info if line.startswith("flags")), "")
        flags = set(line.split(":", 1)[-1].split())
    except OSError:
        pass
    have = [flag for flag in FLAGS if flag in flags]
    lacks = [flag for flag in FLAGS if flag not in flags]
    return f"{hardware()}\nCPU flags: has {' '.join(have) or 'none'}; lacks {' '.join(lacks) or 'none'}"


def _rounds(count: int) -> str:
    """The count in words: 1 round, 2 rounds."""
    return f"{count} round" if count == 1 else f"{count} rounds"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=3000, help="lines of the text (default 3000)")
    parser.add_argument("--rounds", type=int, default=2, help="each variant once a round")
    parser.add_argument("--models", default="minilm,roberta-base", help="comma-separated")
    parser.add_argument(
        "--variants",
        type=parse_variants,
        default=MINILM_VARIANTS,
        help=f"MiniLM's, comma-separated, pieces joined by + (default: {MINILM_VARIANTS}); "
        "float32 runs too, first, as the baseline; "
        f"pieces: {', '.join([*DTYPES, *OPTIONS, *PATCHES, *ENVIRONMENTS, 'budgetN'])}",
    )
    parser.add_argument(
        "--roberta-variants",
        type=parse_variants,
        default=ROBERTA_VARIANTS,
        help=f"roberta-base's (default: {ROBERTA_VARIANTS})",
    )
    args = parser.parse_args()
    import torch
    from quality import minilm_path
    from throughput import build_random_roberta_base, vocabulary_words, write_corpus

    from roberta_static.model.precision import resolve_precision

    print(machine())
    auto = resolve_precision("auto", torch.device("cpu"))
    print(f"--dtype auto on this CPU: {auto.name} ({auto.reason})")
    print(f"{args.lines:,} lines of the text, {_rounds(args.rounds)}, alternating")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        lines = write_corpus(folder / "corpus.txt", lines=args.lines)
        (folder / "vocab.txt").write_text("\n".join(vocabulary_words(None)) + "\n")
        for name in args.models.split(","):
            if name == "minilm":
                model, variants = minilm_path(), args.variants
            elif name == "roberta-base":
                model = build_random_roberta_base(folder / "roberta-base", lines)
                variants = args.roberta_variants
            else:
                parser.error(f"--models: expected minilm or roberta-base, got {name!r}")
            print(f"\n{name}:", flush=True)
            results = measure(model, variants, args.rounds, folder)
            table(f"{name}, {args.lines:,} lines, {_rounds(args.rounds)}", results)
            if name == "minilm":
                auto_targets(results)
                option_targets(results)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child([p for p in sys.argv[2].split(",") if p], sys.argv[4:])
    else:
        main()
