"""The feed: how well the CPU side keeps an encoder busy, with 1 and N workers (issue 25).

For each worker count (``--workers 1,2``; 1 is the one-process engine, N > 1
``DistillConfig(workers=N)``):
First, the hand-over: the producer's chunks over the corpus in one process, pickled and read
back as worker processes send them (four flat arrays a chunk) and as two arrays per sentence
(how they went before), with its share of the producer's time.

(a) the producer only: model tokens/s the CPU side prepares with that many worker processes,
    nothing encoded (``producer.py``'s ``in_workers``, start-up not counted);
(b) ``distill`` end to end with a near-free encoder: random weights, hidden size 32, MiniLM's real
    tokenizer saved beside them, ``--layers 1,12`` blocks (12 is roberta-base's depth; on a CPU
    their cost is mostly arithmetic, against the per-call floor ``encoder_phases.py`` prints);
(c) ``distill`` end to end with a simulated device: an encoder stand-in that takes
    ``real tokens / --simulate-rate`` seconds per batch, sleeping (which releases the GIL, the way a
    GPU's kernels do) for what its forward leaves of that time. The stand-in is the near-free
    model cut to its embeddings (``layers=[0]``): on a GPU the blocks' arithmetic is the device's,
    not the CPU's, so the stand-in leaves the cores to the CPU side as a GPU does. Torch's
    intra-op threads are at one, as a pass on a GPU sets them. This is how the feed is tested
    without a GPU.
(d) the encoder's process alone: the chunks that ``max(--workers)`` worker processes would hand
    over, made and pickled beforehand, replayed (unpickled in turn, shard by shard as the workers
    would interleave them) into the pass the local engine runs, whose encoder's forward costs
    nothing (zeros of the states' shape): the model tokens/s this process can take in, batch,
    pool and sum on one core's worth of GIL, with a GPU's budget (131,072 tokens, or
    ``--batch-tokens``). On a GPU machine the workers have cores of their own, so this, not (c),
    is the feed's ceiling there, short of the forward's own host time. Only with workers (one
    process hands no chunks over), and only on the whole text: it takes 0.2 s of it, a good part
    of that the batcher filling its first batch.

Each end-to-end run prints model tokens/s (meta.json ``stats.tokens / stats.seconds``), wall
time, when the first batch reached the encoder (the start-up: model, segmenter, worker processes)
and the rate from then on, the encoder batches and their mean real tokens, the padded share, the
share of the run the encoder side waited for input (``stats.encoder_wait_seconds``), the full
garbage collections of the encoder's process (how many, and their seconds), the cores the
run kept busy on average (CPU seconds of its process and worker processes during ``distill``, over
its wall time: a run near all the machine's cores is bound by them), and how many cores other
processes kept busy meanwhile (from /proc/stat, less this benchmark's own CPU time). Then the
issue's targets, computed from the best of ``--repeat`` runs, each marked pass or FAIL.

Every run is a fresh process: a run in a warm process would find spaCy's tokenizer cache and
vocabulary filled by the one before. Runs go in rounds, each round measuring every worker count
of one kind back to back (in reverse order every other round), so the compared runs share the
machine's load as closely as possible.

Input: gensim's Wikipedia excerpt + lee_background.cor, two copies (``--copies``; ``--lines``
keeps the first lines of one copy), the SimLex-999 + WordSim-353 vocabulary, ``--max-contexts 0``
(every occurrence).

``--batch-tokens N`` gives ``distill`` a GPU-sized budget (131,072 is its cap on CUDA) to see the
batches a GPU would get.

Usage: python benchmarks/feed.py [--workers 1,2] [--layers 1,12] [--simulate-rate 1e6]
       [--repeat 1] [--copies 2] [--lines N] [--max-contexts 0] [--corpus FILE] [--vocab FILE]
       [--batch-tokens N]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from throughput import (
    check_files,
    default_model,
    hardware,
    positive,
    vocabulary_words,
    write_corpus,
)

HIDDEN = 32  # the near-free encoder's width: its arithmetic is negligible next to the feed's
PRODUCER = "producer"
NEAR_FREE = "near-free"
SIMULATED = "simulated"
HANDOVER = "hand-over"
ENCODER_SIDE = "encoder side"
GPU_TARGET = 1_000_000  # model tokens/s end to end, random roberta-base on an H100 (issue 25)
# What producer.py sets for its worker processes (and distill's workers set for themselves).
PRODUCER_ENV = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def build_near_free(folder: Path, layers: int, tokenizer_model: str) -> str:
    """A random-weight BERT of ``layers`` blocks, ``HIDDEN`` wide, with ``tokenizer_model``'s
    tokenizer saved beside it, the way a downloaded model is."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.utils import logging

    logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_model)
    config = AutoConfig.from_pretrained(tokenizer_model)
    config.update(
        {
            "hidden_size": HIDDEN,
            "num_hidden_layers": layers,
            "num_attention_heads": 2,
            "intermediate_size": 2 * HIDDEN,
        }
    )
    torch.manual_seed(0)
    AutoModel.from_config(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


class SimulatedDevice:
    """Forward hooks making a model's forward take ``real tokens / rate`` seconds in all: an
    encoder stand-in that, like a GPU, costs time in proportion to its tokens and leaves the GIL
    to the CPU side meanwhile. A forward longer than that is not cut short."""

    def __init__(self, rate: float) -> None:
        self.rate, self.deadline = rate, 0.0

    def attach(self, model: Any) -> None:
        model.register_forward_pre_hook(self.start, with_kwargs=True)
        model.register_forward_hook(self.finish)

    def start(self, module: Any, args: tuple, kwargs: dict[str, Any]) -> None:
        tokens = real_tokens(kwargs["input_ids"], kwargs["attention_mask"])
        self.deadline = time.perf_counter() + tokens / self.rate

    def finish(self, module: Any, args: tuple, output: Any) -> None:
        time.sleep(max(0.0, self.deadline - time.perf_counter()))


class FullCollections:
    """A ``gc.callbacks`` entry: how many full (generation 2) collections ran, and their seconds."""

    def __init__(self) -> None:
        self.count, self.seconds, self.began = 0, 0.0, 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self.began = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self.began


def real_tokens(input_ids: Any, mask: Any) -> int:
    """Tokens that are not padding, whichever mask the encoder gives the model: none (a batch
    without padding), the 2D padding mask, or a 4D one made from it."""
    if mask is None:
        return input_ids.numel()
    return int((mask[:, 0, 0] if mask.dim() == 4 else mask).sum())


def run_producer(task: dict[str, Any]) -> dict[str, Any]:
    """(a) in this process: ``task["workers"]`` producer processes over the corpus."""
    from producer import in_workers

    words = Path(task["vocab"]).read_text().splitlines()
    tokens, seconds = in_workers([task["corpus"]], words, task["model"], task["workers"])
    return {"tokens": tokens, "seconds": seconds, "wall": seconds}


def run_handover(task: dict[str, Any]) -> dict[str, Any]:
    """The hand-over in this process: the producer's chunks over the corpus, pickled and read
    back as a worker sends them (packed arrays), and as per-sentence arrays (what it was)."""
    from producer import build_producer, whole_task

    words = Path(task["vocab"]).read_text().splitlines()
    producer = build_producer([task["corpus"]], words, task["model"], task["max_contexts"])
    start = time.perf_counter()
    chunks = list(producer.chunks(whole_task(producer, len(words))))
    found = {"producer": time.perf_counter() - start}
    for label, items in (("packed", chunks), ("per sentence", [c.inputs for c in chunks])):
        start = time.perf_counter()
        sent = [pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL) for item in items]
        found[f"{label} dumps"] = time.perf_counter() - start
        start = time.perf_counter()
        for blob in sent:  # only the bytes pickled just above, as a worker's pipe carries them
            pickle.loads(blob)
        found[f"{label} loads"] = time.perf_counter() - start
    return found


def describe_handover(run: dict[str, Any]) -> str:
    """The hand-over's seconds and share of the producer's time, packed and per sentence."""
    parts = []
    for label in ("packed", "per sentence"):
        dumps, loads = run[f"{label} dumps"], run[f"{label} loads"]
        share = (dumps + loads) / run["producer"]
        parts.append(
            f"{label}: pickling {dumps:.3f} s in the workers + unpickling {loads:.3f} s in the "
            f"encoder's process = {share:.1%}"
        )
    return f"of the producer's {run['producer']:.2f} s, " + "; ".join(parts)


def run_distill(task: dict[str, Any]) -> dict[str, Any]:
    """(b) or (c) in this process: one ``distill`` of the corpus, as its meta.json counts it."""
    import torch

    from roberta_static import DistillConfig
    from roberta_static.api import distill_from_model
    from roberta_static.model.loading import load_pretrained
    from roberta_static.text.corpus import Corpus
    from roberta_static.text.vocab import Vocabulary

    simulated = task["kind"] == SIMULATED
    config = DistillConfig(
        model=task["model"],
        max_contexts=task["max_contexts"],
        workers=task["workers"],
        batch_tokens=task.get("batch_tokens"),
        **({"layers": [0]} if simulated else {}),
    )
    model, tokenizer = load_pretrained(config)
    forwards: list[float] = []  # when the first batch reached the encoder: the start-up's cost
    model.register_forward_pre_hook(lambda *_: forwards.append(time.perf_counter()))
    if simulated:
        SimulatedDevice(task["rate"]).attach(model)
        # As on a GPU, where a pass gives torch one intra-op thread (model/threads.py): a
        # second one would only spin beside the CPU side, which the simulated device stands for.
        torch.set_num_threads(1)
    vocab = Vocabulary.from_entries(Path(task["vocab"]).read_text().splitlines())
    collections = FullCollections()
    gc.callbacks.append(collections)
    start, cpu = time.perf_counter(), cpu_seconds()
    vectors = distill_from_model(model, tokenizer, Corpus([Path(task["corpus"])]), vocab, config)
    wall = time.perf_counter() - start
    gc.callbacks.remove(collections)
    # The workers are joined by now, so counted: spawned ones as this process's children, forked
    # ones in their fork server's (which this run started).
    server = fork_server_seconds()
    cores = (cpu_seconds() - cpu + server) / wall
    first = forwards[0] - start
    return {
        **pass_figures(wall, first, cores, collections, vectors.meta["stats"]),
        "server": server,
    }


def pass_figures(
    wall: float, first: float, cores: float, collections: FullCollections, stats: dict[str, Any]
) -> dict[str, Any]:
    """What ``describe`` prints of a pass: its times, cores, collections and counters."""
    keys = ("tokens", "seconds", "batches", "padded_tokens", "encoder_wait_seconds")
    return {
        "wall": wall,
        "first": first,
        "cores": cores,
        "collections": collections.count,
        "collection_seconds": collections.seconds,
        **{key: stats[key] for key in keys},
    }


class ReplayedFeed:
    """A :class:`~roberta_static.engine.base.Feeder` handing over a shard's messages as worker
    processes would: ``workers`` shards at a time, a message of each in turn, each unpickled as
    it is received (what the encoder's process pays for a worker's message).

    It pickles the messages itself, when built: what it unpickles are only those bytes, never a
    file or another process's.
    """

    def __init__(self, messages: dict[int, list[Any]], workers: int) -> None:
        self._pickled = {
            shard: [pickle.dumps(message, pickle.HIGHEST_PROTOCOL) for message in shard_messages]
            for shard, shard_messages in messages.items()
        }
        self.capacity = workers
        self.queued: list[int] = []
        self.reading: list[list[bytes]] = []

    def submit(self, task: Any) -> None:
        self.queued.append(task.shard)

    def receive(self, timeout: float) -> Any:
        while self.queued and len(self.reading) < self.capacity:
            self.reading.append(list(self._pickled[self.queued.pop(0)]))
        if not self.reading:
            return None
        shard = self.reading.pop(0)
        message = pickle.loads(shard.pop(0))
        if shard:
            self.reading.append(shard)
        return message


class FreeDevice:
    """An ``Encoder.forward`` that costs nothing: zeros of the states' shape (a view, no copy),
    with the time of its first call."""

    def __init__(self, encoder: Any) -> None:
        self.layers, self.hidden = len(encoder.layers), encoder.hidden_size
        self.first: float | None = None

    def __call__(self, input_ids: Any, mask: Any) -> Any:
        import torch

        if self.first is None:
            self.first = time.perf_counter()
        rows, width = input_ids.shape
        zeros = torch.zeros(self.layers, 1, 1, self.hidden)
        return zeros.expand(self.layers, rows, width, self.hidden)


def run_encoder_side(task: dict[str, Any]) -> dict[str, Any]:
    """(d) in this process: the pass of the local engine over replayed chunks, a free device."""
    import torch

    from roberta_static import DistillConfig
    from roberta_static.engine.base import Job
    from roberta_static.engine.collector import heap_frozen
    from roberta_static.engine.encoders import EncoderThreads
    from roberta_static.engine.loop import PassLoop
    from roberta_static.engine.messages import CountShard, EncodeShard
    from roberta_static.engine.schedule import fresh_state
    from roberta_static.model.encoder import MAX_GPU_BATCH_TOKENS, Encoder
    from roberta_static.model.loading import load_pretrained
    from roberta_static.text.corpus import Corpus
    from roberta_static.text.segment import load_segmenter
    from roberta_static.text.vocab import Vocabulary

    config = DistillConfig(
        model=task["model"],
        max_contexts=task["max_contexts"],
        workers=task["workers"],
        batch_tokens=task.get("batch_tokens") or MAX_GPU_BATCH_TOKENS,
    )
    model, tokenizer = load_pretrained(config)
    encoder = Encoder(model, tokenizer, config)
    device = encoder.forward = FreeDevice(encoder)
    torch.set_num_threads(1)  # as a pass on a GPU sets it (model/threads.py)
    corpus = Corpus([Path(task["corpus"])])
    vocab = Vocabulary.from_entries(Path(task["vocab"]).read_text().splitlines())
    job = Job(model, tokenizer, encoder, load_segmenter(config.lang), corpus, vocab, config)
    producer = job.producer()

    # Every shard counted first (the quotas of max_contexts), so the replay answers no count.
    state = fresh_state(corpus, len(vocab), job.dim, config, sharded=True)
    for index, shard in enumerate(state.shards[:-1] if state.quotas is not None else []):
        state.quotas.add(producer.count(CountShard(index, shard.shard)).counts)
    messages = {
        index: list(producer.chunks(EncodeShard(index, shard, _allowance(state, index))))
        for index, shard in enumerate(state.shards)
    }
    feed = ReplayedFeed(messages, task["workers"])
    collections = FullCollections()
    gc.callbacks.append(collections)
    pool = EncoderThreads([encoder], len(vocab), job.dim, config)
    loop = PassLoop(job, feed, pool, job.saver(None, None), lambda _: None)
    with heap_frozen():  # as distill runs its pass: the loaded heap, and here the chunks in it
        start, cpu = time.perf_counter(), cpu_seconds()
        stats = loop.run(state).stats
        wall = time.perf_counter() - start
    pool.close()
    gc.callbacks.remove(collections)
    first = (device.first or start + wall) - start
    counters = {**asdict(stats), "seconds": wall}  # the pass alone: no model load, no fill
    return pass_figures(wall, first, (cpu_seconds() - cpu) / wall, collections, counters)


def _allowance(state: Any, shard: int) -> Any:
    return state.quotas.allowance(shard) if state.quotas is not None else None


def busy_seconds() -> float:
    """CPU seconds this machine has spent on anything but idling, since boot."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq = map(int, stat.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def children_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime + children_seconds()


def fork_server_seconds() -> float:
    """CPU seconds of this process's fork server, with those of the workers it forked and reaped
    (``cutime``, ``cstime``): the server is not this process's waited-for child."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != os.getpid():
                continue
            if b"forkserver" in (stat.parent / "cmdline").read_bytes():
                return sum(map(int, fields[11:15])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):  # a process that ended meanwhile
            continue
    return 0.0


def measure(task: dict[str, Any]) -> dict[str, Any]:
    """One run in a fresh process, with the cores other processes kept busy meanwhile."""
    env = {**os.environ, **(PRODUCER_ENV if task["kind"] in (PRODUCER, HANDOVER) else {})}
    busy, ours, start = busy_seconds(), children_seconds(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--task", json.dumps(task)],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode:
        sys.exit(f"{task['kind']} with {task['workers']} workers failed:\n{done.stderr}")
    elapsed = time.perf_counter() - start
    run = json.loads(done.stdout.strip().splitlines()[-1])
    ours = children_seconds() - ours + run.get("server", 0.0)
    others = (busy_seconds() - busy - ours) / elapsed
    return {**run, "others": max(0.0, others)}


def rate(run: dict[str, Any]) -> float:
    return run["tokens"] / run["seconds"]


def describe(run: dict[str, Any]) -> str:
    """A run's figures on one line."""
    line = f"{rate(run):9,.0f} tokens/s  {run['wall']:5.1f} s"
    if "batches" in run:
        after = run["tokens"] / (run["wall"] - run["first"])
        line += f"  first batch at {run['first']:3.1f} s, then {after:7,.0f} tokens/s"
        per_batch = run["tokens"] / run["batches"]
        padded = 1 - run["tokens"] / run["padded_tokens"]
        waited = run["encoder_wait_seconds"] / run["seconds"]
        line += (
            f"  {run['batches']:5,} batches x {per_batch:5,.0f} tokens  padded {padded:5.1%}"
            f"  encoder waited {waited:5.1%}"
        )
        line += f"  cores busy {run['cores']:.1f}"
        line += f"  full GCs {run['collections']} ({run['collection_seconds']:.2f} s)"
    return line + f"  (other processes: {run['others']:.1f} cores)"


def name(kind: str, layers: int, workers: int) -> str:
    engine = "one process" if workers == 1 else f"--workers {workers}"
    if kind == PRODUCER:
        return f"(a) producer only, {workers} worker process{'es' if workers > 1 else ''}"
    if kind == SIMULATED:
        return f"(c) simulated device, {engine}"
    if kind == ENCODER_SIDE:
        return f"(d) encoder's process alone, {workers} worker{'s' if workers > 1 else ''}"
    return f"(b) near-free, {layers} layer{'s' if layers > 1 else ''}, {engine}"


def check(label: str, value: float, bound: float, factor: float, what: str) -> None:
    mark = "pass" if value >= factor * bound else "FAIL"
    print(
        f"  {mark}  {label}: {value:,.0f} vs {factor} x {bound:,.0f} {what} = {value / bound:.2f}x"
    )


def targets(best: dict[tuple, dict[str, Any]], counts: list[int], layers: list[int], sim: float):
    """The issue's targets, from the best runs: each printed as computed, with pass or FAIL."""
    print("\ntargets (best runs):")
    if 1 in counts:
        for depth in layers:
            near_free_targets(best, counts, depth)
    for n in counts:
        if (SIMULATED, layers[0], n) in best and (PRODUCER, 0, n) in best:
            bound = min(sim, rate(best[(PRODUCER, 0, n)]))
            check(
                f"simulated device, {'one process' if n == 1 else f'--workers {n}'}",
                rate(best[(SIMULATED, layers[0], n)]),
                bound,
                0.8,
                f"min({sim:,.0f} simulated, producer-only)",
            )
    side = best.get((ENCODER_SIDE, layers[0], max(counts)))
    if side is not None:
        check(
            "the encoder's process alone (what it can feed a GPU)",
            rate(side),
            GPU_TARGET,
            1.0,
            "the GPU target's end-to-end rate",
        )


def near_free_targets(best: dict[tuple, dict[str, Any]], counts: list[int], depth: int) -> None:
    """The near-free encoder's targets at one depth: against the producer, and with workers."""
    one = best[(NEAR_FREE, depth, 1)]
    if (PRODUCER, 0, 1) in best:
        check(
            f"{depth}-layer one process",
            rate(one),
            rate(best[(PRODUCER, 0, 1)]),
            0.8,
            "producer-only, 1 worker",
        )
    for n in (n for n in counts if n > 1):
        run = best[(NEAR_FREE, depth, n)]
        check(f"{depth}-layer --workers {n}", rate(run), rate(one), 1.2, "one process")
        per_batch = run["tokens"] / run["batches"]
        check(
            f"{depth}-layer --workers {n} tokens per batch",
            per_batch,
            one["tokens"] / one["batches"],
            0.9,
            "one process's",
        )


def count_list(text: str) -> list[int]:
    """An argparse type: counts of 1 or more, comma separated."""
    return [positive(int)(item) for item in text.split(",")]


def summarize(runs: dict[tuple, list[dict[str, Any]]], best: dict[tuple, dict[str, Any]]) -> None:
    """Each measurement's best run and median rate."""
    print(f"\nbest and median of {len(next(iter(runs.values())))} runs:")
    for key, found in runs.items():
        median = statistics.median(rate(run) for run in found)
        print(f"{name(*key):42} {describe(best[key])}  median {median:,.0f} tokens/s")


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """The options that pick the input (shared with ``start_up.py``), and the hidden ``--task``."""
    parser.add_argument("--copies", type=positive(int), default=2, help="copies of the text")
    parser.add_argument(
        "--lines", type=positive(int), help="first lines of one copy (default: all)"
    )
    parser.add_argument("--max-contexts", type=int, default=0, help="0: every occurrence")
    parser.add_argument("--corpus", help="a text file instead of gensim's Wikipedia + Lee text")
    parser.add_argument("--vocab", help="a word list instead of SimLex-999 + WordSim-353's words")
    parser.add_argument("--task", help=argparse.SUPPRESS)


def check_input_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Stop at once, in argparse's one line, on input options that cannot work."""
    if args.max_contexts < 0:
        parser.error(f"argument --max-contexts: must be 0 or more, got {args.max_contexts}")
    check_files(parser, args)


def arguments() -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=count_list, default="1,2", help="1: one process")
    parser.add_argument("--layers", type=count_list, default="1,12", help="near-free depths")
    parser.add_argument("--simulate-rate", type=positive(float), default=1e6, help="tokens/s")
    parser.add_argument(
        "--batch-tokens",
        type=positive(int),
        help="distill's budget (default: its own, 8,192; for (d), a GPU's 131,072)",
    )
    parser.add_argument("--repeat", type=positive(int), default=1, help="runs of each")
    add_input_options(parser)
    args = parser.parse_args()
    check_input_options(parser, args)
    return args


def main() -> None:
    args = arguments()
    if args.task:
        task = json.loads(args.task)
        runners = {PRODUCER: run_producer, HANDOVER: run_handover, ENCODER_SIDE: run_encoder_side}
        runner = runners.get(task["kind"], run_distill)
        print(json.dumps(runner(task)))
        return
    counts, layers = args.workers, args.layers
    words = vocabulary_words(args.vocab)
    print(f"hardware: {hardware()}; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        corpus, vocab = Path(tmp) / "corpus.txt", Path(tmp) / "vocab.txt"
        write_corpus(corpus, repeat=args.copies, lines=args.lines, corpus=args.corpus)
        vocab.write_text("\n".join(words) + "\n")
        models = {
            n: build_near_free(Path(tmp) / f"near-free-{n}", n, default_model()) for n in layers
        }
        print(
            f"corpus {corpus.stat().st_size / 1e6:.2f} MB; {len(vocab.read_text().split())} "
            f"entries; max_contexts {args.max_contexts}; simulated device "
            f"{args.simulate_rate:,.0f} tokens/s"
        )
        handover = {"kind": HANDOVER, "workers": 1, "model": models[layers[0]]}
        handover |= {"corpus": str(corpus), "vocab": str(vocab), "max_contexts": args.max_contexts}
        print(f"{'hand-over, one process':42} {describe_handover(measure(handover))}", flush=True)
        kinds = [(PRODUCER, 0), *((NEAR_FREE, n) for n in layers), (SIMULATED, layers[0])]
        if max(counts) > 1:  # one process hands no chunks over: its producer is a thread of it
            kinds.append((ENCODER_SIDE, layers[0]))
        runs: dict[tuple, list[dict[str, Any]]] = {}
        for round_ in range(args.repeat):
            order = counts if round_ % 2 == 0 else counts[::-1]
            for kind, depth in kinds:
                for workers in [max(counts)] if kind == ENCODER_SIDE else order:
                    task = {
                        "kind": kind,
                        "workers": workers,
                        "model": models[depth or layers[0]],
                        "corpus": str(corpus),
                        "vocab": str(vocab),
                        "max_contexts": args.max_contexts,
                        "rate": args.simulate_rate,
                        "batch_tokens": args.batch_tokens,
                    }
                    run = measure(task)
                    runs.setdefault((kind, depth, workers), []).append(run)
                    print(f"{name(kind, depth, workers):42} {describe(run)}", flush=True)
    best = {key: max(found, key=rate) for key, found in runs.items()}
    if args.repeat > 1:
        summarize(runs, best)
    targets(best, counts, layers, args.simulate_rate)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
