"""Where the encoder thread's time goes in one ``distill``: copies, forward, pooling and sums.

Runs ``distill`` once in this process on the benchmark text and its vocabulary (the offline
all-MiniLM-L6-v2, ``--model`` or ``--random-roberta-base``) and times each phase of every batch on
the encoder's thread: on the host (``perf_counter`` around the call) and, on CUDA, on the device
(timing events recorded on the stream around the call, read once at the end, so timing adds no
wait for the device). On a CPU the two are the same, and only the host time is printed.

Phases: moving a batch's arrays to the device (``Encoder.move``), the forward pass
(``Encoder.forward``, a float32 re-run included), pooling (``occurrence_vectors``), the overflow
check (``Encoded.overflowed``: in half precision, the batch's one wait for the device, so its host
time is mostly the device finishing the batch), and the sums (``Accumulator.add``). Waiting for
input is meta.json's ``encoder_wait_seconds``; the rest of the pass is bookkeeping and the
CPU side.

It also counts the calls to Python's ``compile`` during the pass, by phase and caller (an
H100 profile once showed 4,070 of them, 8.5 s, inside transformers 5's forward; the import of a
module without its cached bytecode is one such caller), and prints the first forward's host time
against the median: a one-off cost of the first batch shows there.

Then the floor of a forward: the median host time of the forward of one 8-token input, where the
arithmetic is negligible and what is left is the per-call cost of the model's blocks (module
calls, dispatch, on CUDA the kernel launches), against the pass's mean forward per batch.

Usage: python benchmarks/encoder_phases.py [--model PATH | --random-roberta-base] [--dtype D]
       [--lines N] [--repeat R] [--workers N]
"""

from __future__ import annotations

import argparse
import builtins
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from throughput import (
    build_random_roberta_base,
    default_model,
    one_line_errors,
    positive,
    vocabulary_words,
    write_corpus,
)

from roberta_static import DistillConfig
from roberta_static.api import distill_from_model
from roberta_static.engine import step
from roberta_static.model.batches import EncoderInput, padded
from roberta_static.model.encoder import Encoded, Encoder
from roberta_static.model.loading import load_pretrained
from roberta_static.model.pooling import Accumulator
from roberta_static.text.corpus import Corpus
from roberta_static.text.vocab import Vocabulary

PHASES = [
    (Encoder, "move", "copies to the device"),
    (Encoder, "forward", "forward"),
    (step, "occurrence_vectors", "pooling"),
    (Encoded, "overflowed", "overflow check (waits)"),
    (Accumulator, "add", "sums"),
]


class Phases:
    """Host and (on CUDA) device time of the calls wrapped by :meth:`wrap`, per phase, and the
    calls to ``compile`` made meanwhile, by phase and caller (see :meth:`count_compiles`)."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.host: dict[str, float] = defaultdict(float)
        self.times: dict[str, list[float]] = defaultdict(list)
        self.calls: Counter[str] = Counter()
        self.events: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
        self.originals: list[tuple[Any, str, Callable]] = []
        self.compiles: Counter[tuple[str, str]] = Counter()
        self._running = threading.local()

    def wrap(self, owner: Any, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            outer = getattr(self._running, "phase", None)
            self._running.phase = phase
            begin = self._event()
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                self.host[phase] += took
                self.times[phase].append(took)
                self.calls[phase] += 1
                self._running.phase = outer
                if begin is not None:
                    self.events[phase].append((begin, self._event()))

        setattr(owner, name, timed)
        self.originals.append((owner, name, original))

    def _event(self) -> Any:
        if not self.cuda:
            return None
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def device_seconds(self, phase: str) -> float:
        torch.cuda.synchronize()
        return sum(begin.elapsed_time(end) for begin, end in self.events[phase]) / 1000

    def count_compiles(self) -> None:
        """Count each call of the builtin ``compile`` until :meth:`restore`.

        The import system calls it for a module whose cached bytecode is missing or stale: such
        calls are counted as "importing <file>"; any other by the function that made it.
        """
        original = builtins.compile

        def counted(source: Any, filename: Any, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1)
            module = caller.f_globals.get("__name__", "?")
            what = (
                f"importing {filename}"
                if module.startswith("importlib")
                else f"{module}.{caller.f_code.co_name}"
            )
            phase = getattr(self._running, "phase", None) or "outside the phases"
            self.compiles[phase, what] += 1
            return original(source, filename, *args, **kwargs)

        builtins.compile = counted
        self.originals.append((builtins, "compile", original))

    def restore(self) -> None:
        for owner, name, original in reversed(self.originals):
            setattr(owner, name, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--random-roberta-base", action="store_true")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument(
        "--lines", type=positive(int), help="first lines of the text (default: all)"
    )
    parser.add_argument("--repeat", type=positive(int), default=1, help="the text this many times")
    parser.add_argument("--workers", default=1, help="a number or auto, as distill's")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.txt"
        lines = write_corpus(corpus_file, args.repeat, args.lines)
        model_path = args.model or (
            build_random_roberta_base(Path(tmp) / "roberta-base-random", lines)
            if args.random_roberta_base
            else default_model()
        )
        config = DistillConfig(model=model_path, dtype=args.dtype, workers=args.workers)
        model, tokenizer = load_pretrained(config)
        vocab = Vocabulary.from_entries(vocabulary_words(None))
        phases = Phases(cuda=torch.cuda.is_available())
        for owner, name, phase in PHASES:
            phases.wrap(owner, name, phase)
        phases.count_compiles()
        try:
            start = time.perf_counter()
            vectors = distill_from_model(model, tokenizer, Corpus([corpus_file]), vocab, config)
            seconds = time.perf_counter() - start
        finally:
            phases.restore()
        floor = forward_floor(model, tokenizer, config)
    report(vectors.meta, seconds, phases)
    mean = phases.host["forward"] / max(1, phases.calls["forward"])
    print(
        f"forward of one 8-token input (the per-call floor): {floor * 1e3:.2f} ms, against "
        f"{mean * 1e3:.2f} ms per batch in the pass ({floor / mean:.1%})"
    )


def forward_floor(model: Any, tokenizer: Any, config: DistillConfig, runs: int = 50) -> float:
    """Median host seconds of the forward of one 8-token input, the device waited for."""
    encoder = Encoder(model, tokenizer, config)
    ids = np.array(tokenizer("one two three four five six")["input_ids"][:8], dtype=np.int64)
    batch = padded([EncoderInput(ids, np.zeros((0, 3), dtype=np.int64))], encoder.subwords.pad_id)
    times = []
    with torch.inference_mode():
        input_ids, mask, _ = encoder.move(batch)
        for _ in range(runs):
            start = time.perf_counter()
            encoder.forward(input_ids, mask)
            if encoder.device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return statistics.median(times[runs // 5 :])  # the first runs warm caches up


def report(meta: dict[str, Any], seconds: float, phases: Phases) -> None:
    stats, model = meta["stats"], meta["model"]
    print(f"model {model['name']}; device {model['device']}, dtype {model['dtype']}")
    print(
        f"pass {seconds:.1f} s: {stats['batches']:,} batches, {stats['tokens']:,} model tokens, "
        f"{stats['tokens'] / seconds:,.0f} tokens/s; float32 re-runs "
        f"{stats['batches_recomputed_float32']}"
    )
    device = "  device s" if phases.cuda else ""
    print(f"{'phase':<26}{'calls':>8}{'host s':>9}{'of pass':>9}{device}")
    for _, _, phase in PHASES:
        line = f"{phase:<26}{phases.calls[phase]:>8,}{phases.host[phase]:>9.2f}"
        line += f"{phases.host[phase] / seconds:>9.1%}"
        if phases.cuda:
            line += f"{phases.device_seconds(phase):>10.2f}"
        print(line)
    waited = stats["encoder_wait_seconds"]
    print(f"{'waiting for input':<26}{'':>8}{waited:>9.2f}{waited / seconds:>9.1%}")
    forwards = phases.times["forward"]
    if forwards:
        print(
            f"forward: the first {forwards[0] * 1e3:.1f} ms on the host, the median "
            f"{statistics.median(forwards) * 1e3:.1f} ms"
        )
    print(compile_calls(phases.compiles))


def compile_calls(compiles: Counter[tuple[str, str]], shown: int = 5) -> str:
    """The count of ``compile`` calls during the pass, with the callers that made the most."""
    lines = [f"compile calls during the pass: {sum(compiles.values()):,}"]
    for (phase, what), calls in compiles.most_common(shown):
        lines.append(f"  {calls:>6,}  {phase}: {what}")
    return "\n".join(lines)


if __name__ == "__main__":
    one_line_errors(main)
