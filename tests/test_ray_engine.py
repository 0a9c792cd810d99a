"""The Ray engine: shard tasks and encoder actors on a local cluster give the serial result."""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import sys
import threading
from types import SimpleNamespace

import numpy as np
import psutil
import pytest
import ray
from conftest import CORPUS_LINES, VOCAB_ENTRIES
from test_workers import assert_batched_as_one_process, assert_same_vectors, stopped_once_encoding

from roberta_static import DistillConfig, distill
from roberta_static.engine.checkpoint import load_checkpoint
from roberta_static.engine.ray.cluster import import_ray
from roberta_static.engine.ray.tasks import RayFeeder
from roberta_static.errors import (
    ConfigError,
    CorpusError,
    Interrupted,
    RobertaStaticWarning,
    WorkerError,
)
from roberta_static.model.batches import EncoderInput
from roberta_static.model.loading import load_pretrained
from roberta_static.stopping import Checkpointing


@pytest.fixture(scope="module", autouse=True)
def cluster():
    # Ray keeps objects under its limit (100 KiB) inside the messages that carry them, and the
    # rest in its object store; a real corpus's chunks go there, and here so do this one's.
    inline = {"max_direct_call_object_size": 1024}
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", _system_config=inline)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus_folder(tmp_path_factory):
    """Two plain files cut into many shards, and a compressed one."""
    import gzip

    folder = tmp_path_factory.mktemp("corpus")
    (folder / "a.txt").write_text("\n".join(CORPUS_LINES * 20) + "\n")
    with gzip.open(folder / "b.txt.gz", "wt") as handle:
        handle.write("\n".join(CORPUS_LINES[::-1] * 5) + "\n")
    (folder / "c.txt").write_text("\n".join(CORPUS_LINES[1:] * 12))
    return folder


@pytest.fixture(scope="module")
def many_files(tmp_path_factory):
    """A folder of 240 documents of three lines each, in subfolders, as a news archive holds."""
    folder = tmp_path_factory.mktemp("many")
    for number in range(240):
        first = number % len(CORPUS_LINES)
        lines = (CORPUS_LINES * 2)[first : first + 3]
        path = folder / f"{number // 100:02d}" / f"doc{number:04d}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(autouse=True)
def small_shards(monkeypatch):
    # The driver plans the shards: about ten, so shards run on both encoders at once.
    monkeypatch.setattr("roberta_static.text.shards.SHARD_BYTES", 2_000)


@pytest.fixture(scope="module")
def config(roberta_dir):
    return DistillConfig(model=str(roberta_dir), layers="1-2", chunk_sentences=16)


@pytest.fixture(scope="module")
def serial_run(corpus_folder, config, tmp_path_factory):
    """The single-process run with a given max_contexts, computed once per module."""
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join(VOCAB_ENTRIES) + "\n")
    runs = {}

    def run(max_contexts):
        if max_contexts not in runs:
            one = config.replace(workers=1, max_contexts=max_contexts)
            runs[max_contexts] = distill(corpus_folder, vocab, one)
        return runs[max_contexts]

    return run


@pytest.mark.parametrize("max_contexts", [0, 7])
def test_ray_with_two_encoders_gives_the_serial_vectors_and_counts(
    corpus_folder, vocab_file, config, serial_run, max_contexts
):
    config = config.replace(max_contexts=max_contexts)
    serial = serial_run(max_contexts)
    reports = []
    on_ray = distill(
        corpus_folder, vocab_file, config.replace(engine="ray", encoders=2), reports.append
    )
    assert_same_vectors(serial, on_ray)
    timing = {"seconds", "encoder_wait_seconds"}
    compared = serial.meta["stats"].keys() - timing - {"padded_tokens", "batches"}
    for key in compared:
        assert on_ray.meta["stats"][key] == serial.meta["stats"][key], key
    # One bar: bytes read across the shards, up to the whole corpus.
    read = [r.bytes_read for r in reports if getattr(r, "stage", None) == "distill"]
    assert read == sorted(read)
    if not max_contexts:
        assert read[-1] == reports[-1].total_bytes


@pytest.mark.parametrize("max_contexts", [0, 7])
def test_on_this_machine_without_gpus_the_driver_encodes_and_gives_the_serial_vectors(
    corpus_folder, vocab_file, config, serial_run, max_contexts, monkeypatch
):
    # The cluster is this machine alone: an actor would be a second process holding torch and
    # the model, so the driver encodes what the shard tasks read.
    def no_actors(*args, **kwargs):
        raise AssertionError("an encoder actor was started")

    monkeypatch.setattr("roberta_static.engine.ray.engine.RayEncoders", no_actors)
    config = config.replace(max_contexts=max_contexts)
    on_ray = distill(corpus_folder, vocab_file, config.replace(engine="ray"))
    assert_same_vectors(serial_run(max_contexts), on_ray)
    assert on_ray.meta["stats"]["tokens"] == serial_run(max_contexts).meta["stats"]["tokens"]


@pytest.mark.parametrize(
    ("nodes", "gpus", "alone"),
    [
        ([("here", True)], 0, True),
        ([("here", True), ("gone", False)], 0, True),
        ([("here", True), ("there", True)], 0, False),
        ([("here", True)], 1, False),
    ],
)
def test_the_driver_encodes_only_on_a_cluster_of_its_machine_alone_without_gpus(nodes, gpus, alone):
    from roberta_static.engine.ray.engine import _this_machine_without_gpus

    class Cluster:
        def get_runtime_context(self):
            return SimpleNamespace(get_node_id=lambda: "here")

        def nodes(self):
            return [{"NodeID": node, "Alive": alive} for node, alive in nodes]

        def cluster_resources(self):
            return {"CPU": 2.0, **({"GPU": float(gpus)} if gpus else {})}

    assert _this_machine_without_gpus(Cluster()) is alone


@pytest.mark.parametrize("max_contexts", [0, 7])
def test_ray_batches_the_inputs_of_many_shards_together(
    corpus_folder, vocab_file, config, max_contexts, monkeypatch
):
    # Every shard is a small piece of the corpus: batched shard by shard, the batches would be
    # small. The pass loop pools the inputs of chunks from any shard into batches as large as
    # one process's: the vectors and counts are one process's.
    monkeypatch.setattr("roberta_static.text.shards.SHARD_BYTES", 600)
    config = config.replace(layers="1", max_contexts=max_contexts, chunk_sentences=2048)
    serial = distill(corpus_folder, vocab_file, config.replace(workers=1))
    on_ray = distill(corpus_folder, vocab_file, config.replace(engine="ray", encoders=1))
    assert_batched_as_one_process(serial, on_ray, corpus_folder)
    one, many = serial.meta["stats"], on_ray.meta["stats"]
    assert many["tokens"] == one["tokens"] and many["occurrences_used"] == one["occurrences_used"]


def test_an_actor_sums_a_batch_once_and_hands_its_sums_over_when_drained(config):
    # Ray sends a restarted actor the calls it had not answered, and the driver sends it again
    # the batches it had not drained: an actor must sum each batch once.
    from roberta_static.engine.ray import actors
    from roberta_static.model.batches import padded

    model, tokenizer = load_pretrained(config)
    entries = 3
    parts = [ray.put((*actors.model_parts(model), tokenizer))]
    actor = actors.EncoderActor(parts, config, entries, "cpu")

    def batch(entry):  # one input holding an occurrence of ``entry``
        return padded(
            [EncoderInput(np.array([0, 40 + entry, 41, 2]), np.array([[1, 3, entry]]))], 1
        )

    assert actor.encode(0, batch(0)).tokens == 4
    assert actor.encode(0, batch(0)).tokens == 0  # again: not summed twice
    assert actor.encode(1, batch(2)).tokens == 4
    first = actor.drain()
    assert first.tickets == [0, 1] and first.rows.tolist() == [0, 2]
    assert first.counts.tolist() == [1, 1] and first.stats.tokens == 8
    assert first.started == actor.started
    actor.encode(2, batch(0))
    second = actor.drain()  # only what came after the first drain
    assert second.tickets == [2] and second.rows.tolist() == [0] and second.counts.tolist() == [1]
    np.testing.assert_allclose(second.sums, first.sums[:1])
    empty = actor.drain()
    assert empty.tickets == [] and len(empty.rows) == 0


def _shard_task_pids() -> list[int]:
    """This test's processes running a shard task now (Ray titles them after the function).

    Only descendants of this process, the cluster the ``cluster`` fixture started: never another
    user's Ray run on the same machine.
    """
    pids = []
    for process in psutil.Process().children(recursive=True):
        try:
            title = process.cmdline()
        except psutil.Error:  # ended meanwhile
            continue
        if title and title[0].startswith("ray::produce_shard"):
            pids.append(process.pid)
    return pids


def test_a_killed_shard_task_and_encoder_actor_are_rerun_and_nothing_is_lost_or_counted_twice(
    corpus_folder, vocab_file, config, serial_run
):
    config = config.replace(max_contexts=0)
    serial = serial_run(0)
    killed = {}

    def kill_each_once(report):
        # A task is killed as soon as one runs: waiting for the first sum too, as the actor
        # does, could find every task ended (the actor sums once 16 sentences are in).
        if "task" not in killed and (pids := _shard_task_pids()):
            os.kill(pids[0], signal.SIGKILL)
            killed["task"] = report
        if "actor" not in killed and getattr(report, "tokens", 0):
            names = [n for n in ray.util.list_named_actors() if n.startswith("roberta-static-")]
            ray.kill(ray.get_actor(sorted(names)[0]), no_restart=False)
            killed["actor"] = report

    on_ray = distill(
        corpus_folder, vocab_file, config.replace(engine="ray", encoders=2), kill_each_once
    )
    for report in killed.values():  # mid-run
        assert report.bytes_read < report.total_bytes
    assert set(killed) == {"actor", "task"}
    assert_same_vectors(serial, on_ray)
    for key in ("occurrences_used", "sentences", "sentences_encoded", "tokens", "windows"):
        assert on_ray.meta["stats"][key] == serial.meta["stats"][key], key


def test_a_shard_task_whose_worker_dies_at_every_attempt_fails_the_run_in_one_line(
    corpus_folder, vocab_file, config, monkeypatch
):
    def dies(*args, **kwargs):
        os._exit(1)
        yield  # a generator, as the shard task is

    monkeypatch.setattr("roberta_static.engine.ray.tasks.produce_shard", dies)
    with pytest.raises(
        WorkerError, match=r"^shard \d+: .* died at each of its 4 attempts \(the last"
    ):
        distill(corpus_folder, vocab_file, config.replace(engine="ray", max_contexts=0))


def _holding_later_shards(receive, stop: threading.Event):
    """``RayFeeder.receive`` keeping the messages of shards after the first two until ``stop``."""
    held = []

    def receive_holding(feeder, timeout):
        if held and (stop.is_set() or not feeder.running):  # nothing else will come: no hang
            return held.pop(0)
        message = receive(feeder, timeout)
        if message is not None and message.shard >= 2 and not stop.is_set():
            held.append(message)
            return None
        return message

    return receive_holding


def test_a_stopped_ray_run_resumes_exactly_on_either_engine(
    corpus_folder, vocab_file, config, serial_run, tmp_path, monkeypatch
):
    config = config.replace(max_contexts=0)
    serial = serial_run(0)
    stop = threading.Event()
    checkpointing = Checkpointing(tmp_path, 0, stop)
    # Small batches go as soon as they fill: some are summed before the later shards come.
    stopped = config.replace(engine="ray", encoders=2, batch_tokens=64)

    def stop_once_a_batch_is_summed(report):
        if not checkpointing.nothing_to_lose:
            stop.set()

    # The chunks of shards after the first two reach the loop only once the stop is asked: the
    # checkpoint then holds unfinished shards however fast they ran (the state, not the timing,
    # decides).
    monkeypatch.setattr(RayFeeder, "receive", _holding_later_shards(RayFeeder.receive, stop))

    with pytest.raises(Interrupted, match="resume with"):
        distill(
            corpus_folder,
            vocab_file,
            stopped,
            progress=stop_once_a_batch_is_summed,
            checkpointing=checkpointing,
        )
    saved = load_checkpoint(tmp_path)
    assert len(saved.state.shards) > 1 and not all(s.done for s in saved.state.shards)
    for engine in ({"workers": 1}, {"engine": "ray", "encoders": 1}):
        resumed = distill(corpus_folder, vocab_file, config.replace(**engine), resume_from=saved)
        assert_same_vectors(serial, resumed)
        for key in ("occurrences_used", "sentences", "text_units", "tokens", "sentences_encoded"):
            assert resumed.meta["stats"][key] == serial.meta["stats"][key], key


def test_no_checkpoint_is_written_before_the_first_batch_is_summed(
    corpus_folder, vocab_file, config, tmp_path, monkeypatch
):
    from roberta_static.engine.checkpoint import Saver

    summed_when_saved = []
    save = Saver.save

    def recording(saver, state):
        summed_when_saved.append(state.stats.batches)
        save(saver, state)

    monkeypatch.setattr(Saver, "save", recording)
    ray_config = config.replace(engine="ray", encoders=1, max_contexts=0)
    distill(corpus_folder, vocab_file, ray_config, checkpointing=Checkpointing(tmp_path, 1e-6))
    assert summed_when_saved and min(summed_when_saved) >= 1


def test_a_bad_line_in_a_shard_is_one_line_naming_the_file_and_line(
    roberta_dir, vocab_file, tmp_path
):
    corpus = tmp_path / "docs.jsonl"
    records = [json.dumps({"text": line}) for line in CORPUS_LINES * 5]
    corpus.write_text("\n".join(records[:30] + ["{broken"] + records[30:]) + "\n")
    config = DistillConfig(model=str(roberta_dir), layers="1", engine="ray")
    with pytest.raises(CorpusError) as error:
        distill(corpus, vocab_file, config)
    message = str(error.value)
    assert message.startswith(f"{corpus}:31: not valid JSON (Expecting property name")
    assert "\n" not in message


def test_without_ray_installed_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(ConfigError, match=r'pip install -c constraints.txt "\.\[ray\]"'):
        import_ray()


def test_engine_options_do_not_change_the_result():
    base = DistillConfig(model="m")
    on_ray = base.replace(engine="ray", ray_address="auto", encoders=4)
    assert on_ray.result_options() == base.result_options()
    with pytest.raises(ConfigError, match="engine"):
        base.replace(engine="spark")
    with pytest.raises(ConfigError, match="encoders"):
        base.replace(encoders=0)


def test_texts_in_memory_are_refused_as_they_have_no_shards(config):
    with pytest.raises(ConfigError, match="texts in memory"):
        distill(texts=CORPUS_LINES, vocab=["cat"], config=config.replace(engine="ray"))


def test_a_cluster_address_nothing_answers_on_is_refused_before_the_model_loads(monkeypatch):
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a fresh CLI process
    config = DistillConfig(model="no-such-model", engine="ray", ray_address="127.0.0.1:1")
    with pytest.raises(ConfigError, match=r"ray_address: nothing answers at 127\.0\.0\.1:1"):
        distill(texts=["a cat"], vocab=["cat"], config=config)


@pytest.mark.parametrize("address", ["nonsense", "host:port", ":6379"])
def test_what_is_not_a_cluster_address_is_refused_before_the_model_loads(monkeypatch, address):
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    config = DistillConfig(model="no-such-model", engine="ray", ray_address=address)
    with pytest.raises(ConfigError, match="is not the address of a Ray cluster: give HOST:PORT"):
        distill(texts=["a cat"], vocab=["cat"], config=config)


def test_a_run_that_starts_its_own_cluster_shows_none_of_ray_s_log_lines(
    roberta_dir, vocab_file, tmp_path
):
    # A fresh CLI process, as a user runs it: Ray is joined there, not by this module's fixture.
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS_LINES) + "\n")
    command = [sys.executable, "-m", "roberta_static", "distill", str(corpus)]
    options = ["--vocab", str(vocab_file), "--model", str(roberta_dir), "--engine", "ray"]
    run = subprocess.run(
        [*command, *options, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    ray_lines = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+ [DIWEF] \d+ \d+\]", re.MULTILINE)
    assert not ray_lines.search(run.stderr), run.stderr
    assert (tmp_path / "out" / "vectors.npy").exists()


def test_a_stop_while_the_cluster_starts_waits_for_it_then_shuts_it_down(tmp_path):
    # Cut short, Ray's start-up leaves its agent processes running with no one to stop them.
    from roberta_static.engine.ray.cluster import connected
    from roberta_static.stopping import StopNow

    checkpointing = Checkpointing(tmp_path)
    calls = []

    class StartingRay:
        def is_initialized(self):
            return False

        def init(self, **options):
            calls.append("starting")
            checkpointing.request_stop()  # what the Ctrl-C handler calls
            calls.append("started")

        def shutdown(self):
            calls.append("shut down")

    with pytest.raises(StopNow), connected(StartingRay(), None, checkpointing):
        calls.append("the pass ran")
    assert calls == ["starting", "started", "shut down"]


def test_a_stop_asked_before_the_first_batch_saves_once_one_is_summed(
    corpus_folder, vocab_file, config, tmp_path
):
    # As on every engine: a stop asked by the caller (not a signal) sums a batch first, so a
    # resume has something to go on from.
    stop = threading.Event()
    stop.set()  # before any batch is summed
    with pytest.raises(Interrupted, match="resume with"):
        distill(
            corpus_folder,
            vocab_file,
            config.replace(engine="ray", encoders=1, max_contexts=0),
            checkpointing=Checkpointing(tmp_path / "out", 0, stop),
        )
    saved = load_checkpoint(tmp_path / "out")
    assert saved.state.stats.batches >= 1 and not all(s.done for s in saved.state.shards)


def test_ray_keeps_the_sentence_targets_one_process_keeps(corpus_folder, vocab_file, config):
    targets = config.replace(max_contexts=0, sentence_targets=5)
    one = distill(corpus_folder, vocab_file, targets.replace(workers=1)).targets
    on_ray = distill(corpus_folder, vocab_file, targets.replace(engine="ray", encoders=2)).targets
    assert len(one) == 5 and on_ray.keys.tolist() == one.keys.tolist()
    assert on_ray.entries.tolist() == one.entries.tolist()
    np.testing.assert_allclose(on_ray.vectors, one.vectors, atol=1e-5)


def test_shard_tasks_without_torch_fix_their_mmap_threshold():
    # A Ray worker started as RayFeeder starts its shard tasks when they need no torch.
    from roberta_static.engine.ray import tasks

    def probe() -> tuple[bool, bool]:
        from worker_probe import mmap_threshold_fixed

        from roberta_static.engine.ray import tasks  # noqa: F401 (what the shard tasks import)

        return sys.modules.get("torch") is not None, mmap_threshold_fixed()

    tests = {"PYTHONPATH": os.path.dirname(__file__)}  # for worker_probe
    without_torch = {"env_vars": {**tests, tasks.WITHOUT_TORCH: "1"}}
    assert ray.get(ray.remote(runtime_env=without_torch)(probe).remote()) == (False, True)
    assert ray.get(ray.remote(runtime_env={"env_vars": tests})(probe).remote()) == (True, False)


def test_a_run_leaves_nothing_of_its_tasks_in_the_cluster(corpus_folder, config, tmp_path):
    # Ray keeps the stored arguments of a generator task whose chunks it stores and may run again
    # for as long as the cluster runs: on a corpus of many files, one quota allowance per shard
    # filled its object store.
    fillers = [f"filler{number}" for number in range(1_000)]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join([*VOCAB_ENTRIES, *fillers]) + "\n")
    driver = ray._private.worker.global_worker.core_worker
    before = len(driver.get_all_reference_counts())
    with pytest.warns(RobertaStaticWarning, match="not found in the corpus"):
        distill(corpus_folder, vocab, config.replace(engine="ray", encoders=2, max_contexts=7))
    gc.collect()
    assert len(driver.get_all_reference_counts()) <= before


@pytest.mark.parametrize("max_contexts", [0, 7])
def test_a_folder_of_many_files_gives_the_one_process_vectors_on_every_engine(
    many_files, vocab_file, config, max_contexts
):
    config = config.replace(max_contexts=max_contexts)
    serial = distill(many_files, vocab_file, config.replace(workers=1))
    for engine in ({"workers": 2}, {"engine": "ray", "encoders": 2}):
        other = distill(many_files, vocab_file, config.replace(**engine))
        assert_same_vectors(serial, other)
        for key in ("occurrences_used", "sentences", "text_units", "tokens", "sentences_encoded"):
            assert other.meta["stats"][key] == serial.meta["stats"][key], (engine, key)


def test_a_run_over_many_files_stopped_with_workers_resumes_exactly_on_ray(
    many_files, vocab_file, config, tmp_path
):
    config = config.replace(max_contexts=7)
    serial = distill(many_files, vocab_file, config.replace(workers=1))
    with_workers = config.replace(workers=2, batch_tokens=64)
    saved = stopped_once_encoding(many_files, vocab_file, with_workers, tmp_path)
    assert len(saved.state.shards) > 10 and not all(s.done for s in saved.state.shards)
    resumed = distill(
        many_files, vocab_file, config.replace(engine="ray", encoders=2), resume_from=saved
    )
    assert_same_vectors(serial, resumed)
    for key in ("occurrences_used", "sentences", "text_units", "tokens", "sentences_encoded"):
        assert resumed.meta["stats"][key] == serial.meta["stats"][key], key
