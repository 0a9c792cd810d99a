"""The parallel pass: shards, quotas, worker processes and several encoders give the serial result."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import CORPUS_LINES

from roberta_static import DistillConfig, StaticVectors, distill
from roberta_static.api import distill_from_model
from roberta_static.engine import encoders
from roberta_static.engine.batcher import Batcher
from roberta_static.engine.checkpoint import Checkpoint, load_checkpoint
from roberta_static.engine.messages import Chunk, Counted, CountShard, EncodeShard
from roberta_static.engine.quotas import QuotaPlan
from roberta_static.engine.state import ShardState
from roberta_static.engine.worker import Ready
from roberta_static.errors import Interrupted
from roberta_static.model.loading import load_pretrained
from roberta_static.stopping import Checkpointing
from roberta_static.text.corpus import Corpus
from roberta_static.text.segment import load_segmenter
from roberta_static.text.shards import plan_shards
from roberta_static.text.vocab import VocabPatterns, Vocabulary


@pytest.fixture()
def corpus_folder(tmp_path):
    """Two plain files (one of them cut into several shards) and a compressed one."""
    import gzip

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("\n".join(CORPUS_LINES * 40) + "\n")
    with gzip.open(folder / "b.txt.gz", "wt") as handle:
        handle.write("\n".join(CORPUS_LINES[::-1] * 10) + "\n")
    (folder / "c.txt").write_text("\n".join(CORPUS_LINES[1:] * 25))
    return folder


@pytest.mark.parametrize("shard_bytes", [1, 700, 10_000, 10**9])
def test_shards_read_exactly_the_units_of_the_whole_corpus(corpus_folder, shard_bytes):
    corpus = Corpus([corpus_folder])
    whole = list(corpus.units())
    shards = plan_shards(corpus.files, shard_bytes)
    pieces = [
        unit for shard in shards for unit in Corpus([corpus_folder]).units(shard.start, shard.stop)
    ]
    assert pieces == whole  # texts and positions, line numbers included
    assert len(shards) >= 3 if shard_bytes < 10**9 else len(shards) == 1


def patterns_of(vocab: Vocabulary) -> VocabPatterns:
    """The patterns a run's main process builds for its workers."""
    return VocabPatterns.of(load_segmenter("en"), vocab)


def test_a_file_gone_after_the_listing_stops_the_shard_plan_with_one_line_naming_it(tmp_path):
    from roberta_static.errors import CorpusError

    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("A cat sat.\n" * 500)
    corpus = Corpus([tmp_path])
    (tmp_path / "b.txt").unlink()  # while the model loads, say
    with pytest.raises(CorpusError, match=r"b\.txt: cannot read \(No such file"):
        plan_shards(corpus.files, 1_000, sizes=corpus.sizes)


def test_many_small_files_share_shards_and_a_compressed_file_is_never_cut(tmp_path):
    import gzip

    folder = tmp_path / "docs"
    folder.mkdir()
    for number in range(300):
        (folder / f"{number:04}.txt").write_text(f"Document {number} holds a cat.\n" * 3)
    with gzip.open(folder / "0150.txt.gz", "wt") as handle:
        handle.write("A compressed dog.\n" * 2000)
    corpus = Corpus([folder])
    shards = plan_shards(corpus.files, 2_000, sizes=corpus.sizes)
    assert 10 < len(shards) < 100  # about 2 kB each, not one a file
    starts = [(shard.start.file, shard.start.offset) for shard in shards]
    compressed = corpus.files.index(folder / "0150.txt.gz")
    assert all(offset == 0 for file, offset in starts if file == compressed)
    pieces = [unit for shard in shards for unit in corpus.units(shard.start, shard.stop)]
    assert pieces == list(corpus.units())


def test_a_large_corpus_is_cut_into_more_shards_not_larger_ones(tmp_path):
    # A shard's counting and reading are held whole while it is read: past 128 shards' worth of
    # bytes, more shards come, none larger.
    from roberta_static.text.shards import SHARD_BYTES, TARGET_SHARDS

    files = []
    for number in range(2 * TARGET_SHARDS):
        files.append(tmp_path / f"{number:04}.txt")
        files[-1].write_text("a line\n")
    shards = plan_shards(files, sizes=[SHARD_BYTES] * len(files))  # as large as listed
    assert len(shards) == len(files)  # one a file: two of them would pass SHARD_BYTES


def test_quotas_take_the_first_n_occurrences_in_corpus_order():
    from roberta_static.engine.quotas import EntryCounts

    rng = np.random.default_rng(0)
    for _ in range(50):
        counts = rng.integers(0, 6, size=(5, 4))
        limit = int(rng.integers(1, 12))
        # Reference: walk the occurrences in corpus order, taking while fewer than N are taken.
        taken = np.zeros_like(counts)
        for entry in range(counts.shape[1]):
            left = limit
            for shard in range(counts.shape[0]):
                take = min(left, counts[shard, entry])
                taken[shard, entry], left = take, left - take
        # A shard may take its allowance once the shards before it are counted; the last one
        # is never counted. Whether counted later or not, each shard's allowance is the same.
        # A shard's counting leaves out the entries the plan showed had their N when it was
        # handed out, at any time since the shards before it could be counted.
        plan = QuotaPlan.fresh(counts.shape[1], limit)
        shown = [plan.exhausted()]
        for shard in range(counts.shape[0]):
            before = plan.allowance(shard)
            if shard < counts.shape[0] - 1:
                left_out = shown[int(rng.integers(0, len(shown)))]
                found = np.where(left_out, 0, counts[shard])
                plan.add(EntryCounts.of(np.repeat(np.arange(counts.shape[1]), found)))
                shown.append(plan.exhausted())
                after = plan.allowance(shard)
                np.testing.assert_array_equal(np.minimum(after, counts[shard]), taken[shard])
            np.testing.assert_array_equal(np.minimum(before, counts[shard]), taken[shard])
        # The counts the plan keeps are the same whatever was left out: to each entry's N-th.
        reached = np.where(plan.exhausted(), plan.reached_in, counts.shape[0] - 2)
        upto = np.arange(counts.shape[0] - 1)[:, None] <= reached[None, :]
        np.testing.assert_array_equal(plan.before, (counts[:-1] * upto).sum(axis=0))
        # Where every entry has had its N in the shards counted, the shards after are not read.
        every = np.flatnonzero((counts[:-1].cumsum(axis=0) >= limit).all(axis=1))
        assert plan.last_shard_read() == (int(every[0]) if len(every) else None)


@pytest.fixture()
def small_shards(monkeypatch):
    monkeypatch.setattr("roberta_static.text.shards.SHARD_BYTES", 2_000)


def assert_same_vectors(serial, parallel):
    assert parallel.words == serial.words
    np.testing.assert_array_equal(parallel.counts, serial.counts)
    a, b = serial.vectors, parallel.vectors
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cosine.min() >= 0.99999


def assert_batched_as_one_process(serial, parallel, corpus_folder) -> None:
    """The same vectors, and batches as few and as full as one process's, from many shards."""
    assert_same_vectors(serial, parallel)
    shards = len(plan_shards(sorted(p for p in corpus_folder.iterdir() if p.is_file())))
    one, many = serial.meta["stats"], parallel.meta["stats"]
    assert shards > 2 * one["batches"]
    assert many["batches"] <= one["batches"] + 2
    assert many["tokens"] / many["batches"] >= 0.9 * one["tokens"] / one["batches"]


FREQUENT = ["cat", "dog", "garden", "new york"]


@pytest.mark.parametrize(
    ("max_contexts", "entries"),
    # 130: cat, dog and garden have theirs in a.txt, new york only in b.txt.gz, and the serial
    # pass stops there; shards where cat may take nothing are still read for new york.
    [(0, None), (7, None), (130, FREQUENT)],
)
def test_workers_and_two_encoders_give_the_serial_vectors_and_counts(
    roberta_dir, corpus_folder, vocab_file, small_shards, max_contexts, entries
):
    config = DistillConfig(model=str(roberta_dir), layers="1-2", max_contexts=max_contexts)
    vocab = entries or vocab_file
    serial = distill(corpus_folder, vocab, config.replace(workers=1))
    parallel = distill(corpus_folder, vocab, config.replace(workers=2, device="cpu,cpu"))
    assert_same_vectors(serial, parallel)
    assert serial.meta["stats"]["stopped_early"] == (entries is not None)
    # Chunks end at shard ends, so batches (and their padding) differ; everything else is equal.
    batching = {"padded_tokens", "batches", "seconds", "encoder_wait_seconds"}
    for key in serial.meta["stats"].keys() - batching:
        assert parallel.meta["stats"][key] == serial.meta["stats"][key], key


@pytest.mark.parametrize("without_torch", [True, False])
def test_a_worker_serves_its_tasks_and_imports_torch_only_when_asked(
    roberta_dir, corpus_folder, vocab_file, without_torch
):
    # Imports cost about half a worker's start-up: with the blank segmenter it needs no torch,
    # and is forked from a server that imported spaCy once for every worker.
    from worker_probe import probe

    from roberta_static.engine.local import _worker_context
    from roberta_static.engine.producer import ProducerSetup, needs_torch
    from roberta_static.model.encoder import Encoder

    config = DistillConfig(model=str(roberta_dir), layers="1")
    model, tokenizer = load_pretrained(config)
    corpus, vocab = Corpus([corpus_folder]), Vocabulary.from_file(vocab_file)
    setup = ProducerSetup.of(Encoder(model, tokenizer, config), corpus, patterns_of(vocab), config)
    assert not needs_torch(config)
    assert needs_torch(config.replace(spacy_model="x"))
    shard = plan_shards(corpus.files)[0]
    # A process started as the local engine starts its workers, fed by the same queues.
    context = _worker_context(without_torch)
    setups, tasks, results = context.Queue(), context.Queue(), context.Queue()
    setups.put(setup)
    tasks.put(CountShard(3, shard))
    tasks.put(None)
    worker = context.Process(target=probe, args=(setups, tasks, results, without_torch))
    worker.start()
    try:
        messages = [results.get(timeout=120) for _ in range(6)]
    finally:
        worker.join(timeout=10)
        if worker.is_alive():
            worker.terminate()
    expected = setup.producer().count(CountShard(3, shard))
    assert expected.counts.counts.sum() > 0
    assert messages[0] == Ready(worker.pid)
    assert isinstance(messages[1], Counted) and messages[1].shard == 3
    assert messages[1].counts.entries.tolist() == expected.counts.entries.tolist()
    assert messages[1].counts.counts.tolist() == expected.counts.counts.tolist()
    assert messages[2] == ("torch", -1, not without_torch)
    assert messages[3] == ("preloaded", -1, without_torch)
    assert messages[4] == ("frozen", -1, True)  # what it built lives as long as it
    # A worker without torch runs no model: its heap keeps no holes at no cost.
    assert messages[5] == ("mmap threshold fixed", -1, without_torch)


@pytest.mark.parametrize("max_contexts", [0, 7])
def test_workers_batch_the_inputs_of_many_shards_together(
    roberta_dir, corpus_folder, vocab_file, small_shards, max_contexts
):
    # Every shard is a small piece of the corpus: batched shard by shard, the batches would be
    # small. The encoder side pools their inputs into batches as large as one process's.
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=max_contexts)
    serial = distill(corpus_folder, vocab_file, config.replace(workers=1))
    parallel = distill(corpus_folder, vocab_file, config.replace(workers=2))
    assert_batched_as_one_process(serial, parallel, corpus_folder)


def test_one_process_batches_the_inputs_of_many_chunks_together(
    roberta_dir, corpus_folder, vocab_file
):
    # Chunks of 4 sentences, batched chunk by chunk, would make many small batches; their
    # inputs wait together instead, as those of one chunk holding the whole corpus would.
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=0)
    whole = distill(corpus_folder, vocab_file, config.replace(chunk_sentences=100_000))
    small = distill(corpus_folder, vocab_file, config.replace(chunk_sentences=4))
    assert_same_vectors(whole, small)
    assert small.meta["stats"]["sentences"] > 10 * 4
    assert small.meta["stats"]["batches"] == whole.meta["stats"]["batches"]
    again = distill(corpus_folder, vocab_file, config.replace(chunk_sentences=4))
    np.testing.assert_array_equal(again.vectors, small.vectors)  # the same batches every time


def test_a_stopped_parallel_run_resumes_exactly_with_another_worker_count(
    roberta_dir, corpus_folder, vocab_file, small_shards, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=4)
    serial = distill(corpus_folder, vocab_file, config.replace(workers=1))
    saved = stopped_once_encoding(corpus_folder, vocab_file, config.replace(workers=2), tmp_path)
    assert len(saved.state.shards) > 1 and not all(s.done for s in saved.state.shards)
    # One worker process now: the shards, not the workers, carry the state.
    resumed = distill(corpus_folder, vocab_file, config.replace(workers=1), resume_from=saved)
    assert_same_vectors(serial, resumed)
    for key in ("occurrences_used", "sentences", "text_units", "tokens", "sentences_encoded"):
        assert resumed.meta["stats"][key] == serial.meta["stats"][key], key


def stopped_once_encoding(corpus, vocab_file, config: DistillConfig, out) -> Checkpoint:
    """A run stopped once its first batches are encoded; its checkpoint, in ``out``."""
    stop = threading.Event()

    def stop_once_encoding(report):
        if getattr(report, "tokens", 0):
            stop.set()

    with pytest.raises(Interrupted, match="resume with"):
        distill(
            corpus, vocab_file, config, progress=stop_once_encoding,
            checkpointing=Checkpointing(out, 0, stop),
        )  # fmt: skip
    return load_checkpoint(out)


def stop_holding_a_batch(model, checkpointing: Checkpointing, at_call: int) -> None:
    """Set the stop in the encoder's ``at_call``-th forward and hold it there until saved.

    The encoders then hold a chunk begun but not summed: the checkpoint keeps its batches left.
    """
    calls = []

    def hook(module, args):
        calls.append(1)
        if len(calls) == at_call:
            checkpointing.stop.set()
            _wait_until(lambda: checkpointing.written)

    model.register_forward_pre_hook(hook)


def stopped_with_batches_left(roberta_dir, corpus, vocab_file, out) -> Checkpoint:
    """A run with two workers, stopped with a chunk half summed; its checkpoint."""
    config = DistillConfig(
        model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=16, batch_tokens=64
    )
    model, tokenizer = load_pretrained(config)
    checkpointing = Checkpointing(out, 0)
    stop_holding_a_batch(model, checkpointing, at_call=3)
    with pytest.raises(Interrupted, match="resume with"):
        distill_from_model(
            model, tokenizer, Corpus([corpus]), Vocabulary.from_file(vocab_file, "lower"),
            config.replace(workers=2), checkpointing=checkpointing,
        )  # fmt: skip
    saved = load_checkpoint(out)
    assert any(shard.leftover for shard in saved.state.shards)
    return saved


def test_batches_left_at_a_stop_wait_in_the_checkpoint_and_are_summed_once_resumed(
    roberta_dir, corpus_folder, vocab_file, small_shards, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=0)
    serial = distill(corpus_folder, vocab_file, config)
    saved = stopped_with_batches_left(roberta_dir, corpus_folder, vocab_file, tmp_path / "out")
    resumed = distill(corpus_folder, vocab_file, config.replace(workers=2), resume_from=saved)
    assert_same_vectors(serial, resumed)
    for key in ("occurrences_used", "sentences", "text_units", "tokens", "sentences_encoded"):
        assert resumed.meta["stats"][key] == serial.meta["stats"][key], key


def _shards_of(members) -> set[int]:
    return {chunk.shard for chunk, _ in members}


# 60: cat and dog take their contexts from the first shards of a.txt, the others from more.
@pytest.mark.parametrize("max_contexts", [0, 60])
def test_a_stop_with_batches_of_several_shards_in_hand_resumes_exactly(
    roberta_dir, corpus_folder, vocab_file, small_shards, tmp_path, monkeypatch, max_contexts
):
    # Shards smaller than a chunk: the encoder side pools the inputs of several shards into each
    # batch. The stop comes once the first batch of such a pool is summed: the batches after it,
    # each holding inputs of several shards, wait in the checkpoint, each input in its shard.
    config = DistillConfig(
        model=str(roberta_dir), layers="1", max_contexts=max_contexts, chunk_sentences=16,
        batch_tokens=64,
    )  # fmt: skip
    serial = distill(corpus_folder, vocab_file, config.replace(workers=1))
    checkpointing = Checkpointing(tmp_path / "out", 0)
    pools = []  # batches let go at once, those after the first holding inputs of several shards
    let_go, add = Batcher._batches, encoders.accumulate

    def recording(batcher, hold):
        batches = let_go(batcher, hold)
        if any(len(_shards_of(members)) > 1 for _, members in batches[1:]):
            pools.append(batches)
        return batches

    def stop_once_the_first_is_summed(encoded, batch, *rest):
        add(encoded, batch, *rest)
        if pools and batch is pools[0][0][0]:
            checkpointing.stop.set()  # the encoders drop the batches after the one in hand

    with monkeypatch.context() as patched, pytest.raises(Interrupted, match="resume with"):
        patched.setattr(Batcher, "_batches", recording)
        patched.setattr(encoders, "accumulate", stop_once_the_first_is_summed)
        distill(corpus_folder, vocab_file, config.replace(workers=2), checkpointing=checkpointing)
    saved = load_checkpoint(tmp_path / "out")
    assert sum(bool(shard.leftover) for shard in saved.state.shards) > 1
    resumed = distill(corpus_folder, vocab_file, config.replace(workers=2), resume_from=saved)
    assert_same_vectors(serial, resumed)
    for key in ("occurrences_used", "sentences", "text_units", "tokens", "sentences_encoded"):
        assert resumed.meta["stats"][key] == serial.meta["stats"][key], key


def test_a_workers_bad_input_is_one_line_naming_the_file_and_line(
    roberta_dir, vocab_file, tmp_path
):
    corpus = tmp_path / "docs.jsonl"
    records = [json.dumps({"text": line}) for line in CORPUS_LINES * 5]
    corpus.write_text("\n".join(records[:30] + ["{broken"] + records[30:]) + "\n")
    out = tmp_path / "out"
    result = subprocess.run(
        ["roberta-static", "distill", str(corpus), "--vocab", str(vocab_file), "--model"]
        + [str(roberta_dir), "--out", str(out), "--workers", "2", "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {corpus}:31: not valid JSON (Expecting property name enclosed in double quotes at column 2)"
    ]
    assert not out.exists()


def _workers_of(pid: int, loading: bytes = b"") -> list[int]:
    """The processes of the run ``pid`` leads a session of (its workers, their fork server) that
    still run, and have mapped ``loading``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            session = int(stat.read_text().rsplit(")", 1)[1].split()[3])
            if session != pid or stat.parent.name == str(pid):
                continue
            if loading in (stat.parent / "maps").read_bytes():
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
    return found


def _wait_until(found, process=None, timeout: float = 120) -> None:
    """Poll for a state (of the run in ``process``, if given), never sleeping a fixed time."""
    deadline = time.monotonic() + timeout
    while not found():
        assert process is None or process.poll() is None, "the run ended before that state"
        assert time.monotonic() < deadline, "the state never came"
        time.sleep(0.005)


@pytest.fixture()
def busy_corpus(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("\n".join(CORPUS_LINES * 300) + "\n")
    return path


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for the worker processes")
@pytest.mark.parametrize(
    ("when", "to"),
    [("workers starting", "group"), ("workers starting", "main"), ("encoding", "group")],
)
def test_sigint_stops_workers_quietly_and_what_was_done_resumes(
    when, to, roberta_dir, busy_corpus, vocab_file, small_shards, tmp_path
):
    """SIGINT to the group (Ctrl-C in a terminal: workers too) or to the main process alone."""
    options = ["--vocab", vocab_file, "--model", roberta_dir, "-l", "1", "--max-contexts", "0"]
    options = [*map(str, options), "--chunk-sentences", "16", "--batch-tokens", "128"]
    out = tmp_path / "out"
    process = subprocess.Popen(
        ["roberta-static", "distill", str(busy_corpus), *options, "--out", str(out)]
        + ["--workers", "2", "--checkpoint-every", "0.05"],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        if when == "workers starting":  # spaCy's import, as the workers start
            _wait_until(lambda: _workers_of(process.pid, b"/spacy/"), process)
        else:
            _wait_until((out / ".checkpoint" / "state.json").exists, process)
        workers = _workers_of(process.pid)
        if to == "group":
            os.killpg(process.pid, signal.SIGINT)
        else:
            os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    assert process.returncode == 130, stderr
    assert stderr.startswith("stopping... (Ctrl-C again to quit now)")
    # No worker outlives the run.
    _wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers))
    if not (out / ".checkpoint").exists():  # stopped while the workers started
        assert when == "workers starting" and "nothing was saved" in stderr
        return
    assert f"resume with: roberta-static distill --resume {out}" in stderr
    subprocess.run(["roberta-static", "distill", "--resume", str(out), "-q"], check=True)
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=0)
    assert_same_vectors(distill(busy_corpus, vocab_file, config), StaticVectors.load(out))


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for the worker processes")
def test_a_killed_worker_ends_the_run_with_one_line_and_no_output(
    roberta_dir, busy_corpus, vocab_file, small_shards, tmp_path
):
    # The kernel's out-of-memory killer ends a worker with SIGKILL: no traceback for that.
    options = ["--vocab", vocab_file, "--model", roberta_dir, "-l", "1", "--max-contexts", "0"]
    options = [*map(str, options), "--chunk-sentences", "16", "--batch-tokens", "128"]
    out = tmp_path / "out"
    process = subprocess.Popen(
        ["roberta-static", "distill", str(busy_corpus), *options, "--out", str(out)]
        + ["--workers", "2"],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        workers: list[int] = []

        def forked() -> bool:
            workers[:] = _forked_workers(process.pid)
            return bool(workers)

        _wait_until(forked, process)
        os.kill(workers[0], signal.SIGKILL)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 1, stderr
    assert stderr == "error: a worker process ended unexpectedly (killed by signal 9)\n"
    assert not out.exists()


def _forked_workers(pid: int) -> list[int]:
    """The workers of the run ``pid`` leads a session of: forked by its fork server, which the
    run started (a spawned worker's parent is the run itself)."""
    found = []
    for worker in _workers_of(pid, b"/spacy/"):
        try:
            parent = int(Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
        if parent != pid:
            found.append(worker)
    return found


def receive(feeder) -> Chunk | Counted:
    """A feeder's next message, however long it takes."""
    while (message := feeder.receive(0.1)) is None:
        pass
    return message


def test_a_thread_feeds_the_encoder_until_a_worker_is_ready_then_a_worker_reads_on(
    roberta_dir, corpus_folder, vocab_file, tmp_path
):
    from stuck_setup import GatedSetup

    from roberta_static.engine.local import ProcessFeeder
    from roberta_static.engine.producer import ProducerSetup
    from roberta_static.model.encoder import Encoder

    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=4)
    corpus, vocab = Corpus([corpus_folder / "a.txt"]), Vocabulary.from_file(vocab_file)
    setup = ProducerSetup.of(
        Encoder(*load_pretrained(config), config), corpus, patterns_of(vocab), config
    )
    task = EncodeShard(0, ShardState.fresh(plan_shards(corpus.files, 10**9)[0]))
    expected = [item.ids for chunk in setup.producer().chunks(task) for item in chunk.inputs]
    bridged, proceed = [], threading.Event()

    def bridge_producer():
        producer = setup.producer()
        chunks = producer.chunks

        def held(state):  # the bridge's second chunk waits until a worker is ready
            for chunk in chunks(state):
                bridged.append(chunk)
                yield chunk
                proceed.wait(120)

        producer.chunks = held
        return producer

    gate = tmp_path / "gate"  # the worker starts once the bridge has sent its first chunk
    gated = GatedSetup(**setup.__dict__, gate=str(gate))
    with ProcessFeeder(1, without_torch=True) as feeder:
        feeder.serve(gated, bridge_producer)
        feeder.submit(task)
        received = [receive(feeder)]
        assert len(bridged) == 1
        gate.touch()
        while not feeder.ready.is_set():
            assert feeder.receive(0.1) is None
        proceed.set()
        while not received[-1].done:
            received.append(receive(feeder))
    # The bridge sent its chunk in hand, then a worker read the rest of the shard, in order.
    assert len(bridged) == 2 < len(received)
    got = [item.ids for chunk in received for item in chunk.inputs]
    assert len(got) == len(expected)
    assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))


def test_a_finished_run_ends_its_ready_workers_and_does_not_wait_for_one_still_starting(
    roberta_dir, corpus_folder, vocab_file, tmp_path
):
    # A worker takes seconds to start: a short run must not wait for it at its end.
    from stuck_setup import StuckSetup

    from roberta_static.engine.local import ProcessFeeder
    from roberta_static.engine.producer import ProducerSetup
    from roberta_static.model.encoder import Encoder

    config = DistillConfig(model=str(roberta_dir), layers="1")
    corpus, vocab = Corpus([corpus_folder]), Vocabulary.from_file(vocab_file)
    setup = ProducerSetup.of(
        Encoder(*load_pretrained(config), config), corpus, patterns_of(vocab), config
    )
    stuck = StuckSetup(**setup.__dict__, claimed=str(tmp_path / "claimed"))
    shard = plan_shards(corpus.files)[0]
    with ProcessFeeder(2, without_torch=True) as feeder:
        feeder.serve(stuck, setup.producer)
        while not feeder.ready.is_set():  # count tasks until the first worker is ready
            feeder.submit(CountShard(0, shard))
            assert isinstance(receive(feeder), Counted)
        finishing = time.monotonic()
    ending = time.monotonic() - finishing
    # The ready worker took its end; the one still starting was ended at once, not waited for
    # (5 s, then ended all the same, before).
    assert sorted(process.exitcode for process in feeder.processes) == [-signal.SIGTERM, 0]
    assert ending < 4


def test_an_error_ends_the_bridge_before_the_feeder_returns(roberta_dir, corpus_folder, vocab_file):
    # A bridge left running could fail at the interpreter's exit, after the user's one-line error.
    from roberta_static.engine.local import ProcessFeeder
    from roberta_static.engine.producer import ProducerSetup
    from roberta_static.model.encoder import Encoder

    config = DistillConfig(model=str(roberta_dir), layers="1")
    corpus, vocab = Corpus([corpus_folder]), Vocabulary.from_file(vocab_file)
    setup = ProducerSetup.of(
        Encoder(*load_pretrained(config), config), corpus, patterns_of(vocab), config
    )
    entered, built = threading.Event(), threading.Event()

    def slow_producer():  # the bridge is still building its producer when the error comes
        entered.set()
        time.sleep(0.5)
        built.set()
        return setup.producer()

    with pytest.raises(RuntimeError, match="an error in the pass"):
        with ProcessFeeder(1, without_torch=True) as feeder:
            feeder.serve(setup, slow_producer)
            assert entered.wait(60)
            raise RuntimeError("an error in the pass")
    assert built.is_set()
    assert not feeder.bridge.is_alive()


def test_worker_processes_start_before_the_model_loads_and_end_if_it_fails(
    roberta_dir, corpus_folder, vocab_file, monkeypatch
):
    # They take a second or more to start (spaCy's imports): started first, ready by the pass.
    import multiprocessing

    from roberta_static.errors import ModelLoadError

    config = DistillConfig(model=str(roberta_dir), layers="1", workers=2)
    before = set(multiprocessing.active_children())
    alive_at_load = []

    def failing_load(config):
        # Forked from a server, they may still be starting (it imports spaCy for them first).
        started = lambda: set(multiprocessing.active_children()) - before  # noqa: E731
        with contextlib.suppress(AssertionError):
            _wait_until(lambda: len(started()) == 2, timeout=60)
        alive_at_load.append(started())
        raise ModelLoadError(f"{config.model}: a load that fails")

    monkeypatch.setattr("roberta_static.api.load_pretrained", failing_load)
    with pytest.raises(ModelLoadError, match="a load that fails"):
        distill(corpus_folder, vocab_file, config)
    assert len(alive_at_load[0]) == 2
    assert all(not process.is_alive() for process in alive_at_load[0])


def test_workers_that_cannot_start_fail_the_run(
    roberta_dir, corpus_folder, vocab_file, monkeypatch
):
    # Forked workers start in a thread while the model loads: its error reaches the pass.
    from roberta_static.engine.local import ProcessFeeder

    def failing_start(feeder):
        raise OSError("no process can be started")

    monkeypatch.setattr(ProcessFeeder, "_start_processes", failing_start)
    config = DistillConfig(model=str(roberta_dir), layers="1", workers=2)
    with pytest.raises(OSError, match="no process can be started"):
        distill(corpus_folder, vocab_file, config)


def test_a_script_that_imports_torch_at_its_top_runs_with_workers(
    roberta_dir, corpus_folder, vocab_file, tmp_path
):
    # Each worker runs the script's module first: torch must be importable there, though the
    # workers' fork server imported spaCy with torch kept out.
    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        "import torch\n"
        "from roberta_static import DistillConfig, distill\n"
        "if __name__ == '__main__':\n"
        "    config = DistillConfig(model=sys.argv[1], layers='1', workers=2)\n"
        "    distill(sys.argv[2], sys.argv[3], config).save(sys.argv[4])\n"
    )
    out = tmp_path / "out"
    arguments = [roberta_dir, corpus_folder, vocab_file, out]
    done = subprocess.run(
        [sys.executable, str(script), *map(str, arguments)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    serial = distill(corpus_folder, vocab_file, DistillConfig(model=str(roberta_dir), layers="1"))
    assert_same_vectors(serial, StaticVectors.load(out))


def test_a_script_without_the_main_guard_is_told_it_needs_one(
    roberta_dir, corpus_folder, vocab_file, tmp_path
):
    # Each worker runs the script's module first, so an unguarded run starts again there, and
    # multiprocessing refuses to start processes from a process still starting.
    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        "from roberta_static import DistillConfig, distill\n"
        "config = DistillConfig(model=sys.argv[1], layers='1', workers=2)\n"
        "distill(sys.argv[2], sys.argv[3], config)\n"
    )
    arguments = [roberta_dir, corpus_folder, vocab_file]
    done = subprocess.run(
        [sys.executable, str(script), *map(str, arguments)], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "a worker process failed while starting (exit code 1; its error is above); in a "
            'script, a run with workers must start under if __name__ == "__main__": (see "In a '
            'script" in docs/tasks/parallel.md)'
        )
    )


def test_a_worker_process_sends_all_its_messages_then_exits_without_teardown(
    roberta_dir, corpus_folder, vocab_file, tmp_path
):
    # A spawned interpreter's teardown (spaCy's modules) is time the end of a run would wait.
    import multiprocessing

    from worker_probe import probe_exit

    from roberta_static.engine.producer import ProducerSetup
    from roberta_static.model.encoder import Encoder

    config = DistillConfig(model=str(roberta_dir), layers="1")
    corpus, vocab = Corpus([corpus_folder]), Vocabulary.from_file(vocab_file)
    setup = ProducerSetup.of(
        Encoder(*load_pretrained(config), config), corpus, patterns_of(vocab), config
    )
    shards = plan_shards(corpus.files)
    context = multiprocessing.get_context("spawn")
    setups, tasks, results = context.Queue(), context.Queue(), context.Queue()
    setups.put(setup)
    for index, shard in enumerate(shards):
        tasks.put(CountShard(index, shard))
    tasks.put(None)
    torn_down = tmp_path / "torn-down"
    worker = context.Process(target=probe_exit, args=(setups, tasks, results, torn_down))
    worker.start()
    # Read first: a process that put messages on a queue exits once they are all in the pipe.
    messages = [results.get(timeout=120) for _ in range(len(shards) + 1)]
    worker.join(timeout=120)
    assert worker.exitcode == 0
    assert isinstance(messages[0], Ready)
    assert [(type(message), message.shard) for message in messages[1:]] == [
        (Counted, index) for index in range(len(shards))
    ]
    assert not torn_down.exists()  # the interpreter's exit handlers never ran


def test_auto_workers_feed_a_gpu_from_its_spare_cores_and_leave_a_cpu_model_every_core(
    monkeypatch,
):
    from roberta_static.model.threads import auto_workers

    monkeypatch.setattr("roberta_static.model.threads.usable_cores", lambda: 16)
    assert (auto_workers("cuda"), auto_workers("cpu"), auto_workers("mps")) == (15, 1, 1)
    monkeypatch.setattr("roberta_static.model.threads.usable_cores", lambda: 1)
    assert auto_workers("cuda") == 1


def test_a_cpu_run_with_workers_auto_runs_in_one_process(roberta_dir, corpus_file, vocab_file):
    config = DistillConfig(model=str(roberta_dir), layers="1", device="cpu")
    vectors = distill(corpus_file, vocab_file, config)
    assert vectors.meta["config"]["workers"] == 1
