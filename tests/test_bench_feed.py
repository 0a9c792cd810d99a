"""The feed benchmarks (feed.py, throughput.py, encoder_phases.py, start_up.py): the simulated
device, what worker processes import, bad arguments, the run-to-run figure, a comparison of trees."""

import gc
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import feed  # noqa: E402
from conftest import CORPUS_LINES, VOCAB_ENTRIES  # noqa: E402

from roberta_static import DistillConfig  # noqa: E402
from roberta_static.api import distill_from_model  # noqa: E402
from roberta_static.model.loading import load_pretrained  # noqa: E402
from roberta_static.text.corpus import Corpus  # noqa: E402
from roberta_static.text.shards import plan_shards  # noqa: E402
from roberta_static.text.vocab import Vocabulary  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, input_ids, attention_mask):
        return input_ids


@pytest.mark.parametrize(
    ("mask", "real"),
    [(None, 12), (torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]]), 9)],
)
def test_the_simulated_device_takes_real_tokens_over_rate_per_forward(mask, real):
    model = Model()
    feed.SimulatedDevice(rate=100.0).attach(model)
    start = time.perf_counter()
    model(input_ids=torch.zeros(2, 6, dtype=torch.long), attention_mask=mask)
    assert time.perf_counter() - start >= real / 100.0


def test_full_collections_are_counted_and_timed_and_younger_ones_are_not():
    collections = feed.FullCollections()
    gc.callbacks.append(collections)
    try:
        gc.collect(0)
        gc.collect(1)
        assert collections.count == 0
        gc.collect()
    finally:
        gc.callbacks.remove(collections)
    assert collections.count == 1 and collections.seconds > 0


def test_compile_calls_are_counted_by_phase_and_caller_until_restored(tmp_path, monkeypatch):
    import builtins

    from encoder_phases import Phases, compile_calls

    (tmp_path / "fresh_module_for_phases.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    class Owner:
        def forward(self):
            import fresh_module_for_phases  # noqa: F401  (compiled from source: no bytecode yet)

            return compile("1 + 1", "<expression>", "eval")

    original = builtins.compile
    phases = Phases(cuda=False)
    phases.wrap(Owner, "forward", "forward")
    phases.count_compiles()
    try:
        Owner().forward()
        compile("2", "<outside>", "eval")
    finally:
        phases.restore()
    assert builtins.compile is original and Owner.forward.__name__ == "forward"
    module_file = tmp_path / "fresh_module_for_phases.py"
    this_test = sys._getframe().f_code.co_name
    assert phases.compiles == {
        ("forward", f"importing {module_file}"): 1,
        ("forward", f"{__name__}.forward"): 1,
        ("outside the phases", f"{__name__}.{this_test}"): 1,
    }
    assert compile_calls(phases.compiles).startswith("compile calls during the pass: 3")


def test_replayed_messages_come_a_few_shards_at_a_time_in_turn_each_unpickled_anew():
    from types import SimpleNamespace

    messages = {0: [["a0"], ["a1"], ["a2"]], 1: [["b0"]], 2: [["c0"], ["c1"]]}
    replay = feed.ReplayedFeed(messages, 2)
    for shard in (0, 1, 2):
        replay.submit(SimpleNamespace(shard=shard))
    received = [replay.receive(0.1) for _ in range(6)]
    assert received == [["a0"], ["b0"], ["a1"], ["c0"], ["a2"], ["c1"]]
    assert replay.receive(0.1) is None
    # Each went through pickling, as a worker's message does: a copy, not the object given.
    assert all(message is not messages[0][0] for message in received)


def test_the_gpu_check_without_its_packages_stops_with_one_line(tmp_path):
    (tmp_path / "benchmarks").mkdir()  # a checkout where gpu_pack.sh has not run: no .gpu/
    script = tmp_path / "benchmarks" / "gpu_check.sh"
    script.write_text((BENCHMARKS / "gpu_check.sh").read_text())
    # A python3 that lacks spaCy and gensim, as the GPU machine's does.
    (tmp_path / "python3").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "python3").chmod(0o755)
    done = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "OUT": str(tmp_path),
            "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
        },
    )
    assert done.returncode == 1
    assert done.stderr == (
        "gpu_check.sh: no readable .gpu/site.tar.xz; run benchmarks/gpu_pack.sh first\n"
    )
    assert done.stdout == "" and not list(tmp_path.glob("*.log"))


def test_the_gpu_pack_names_what_the_python_it_runs_lacks(tmp_path):
    # A python whose pip lists nothing installed.
    (tmp_path / "python").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(BENCHMARKS / "gpu_pack.sh")], capture_output=True, text=True, env=env
    )
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(f"gpu_pack.sh: {tmp_path / 'python'} lacks spacy spacy-legacy")
    assert "gensim" in line and line.endswith("(README, Development)")


def test_the_encoder_side_alone_sums_what_the_workers_of_a_real_run_hand_over(
    roberta_dir, tmp_path
):
    corpus, vocab = tmp_path / "corpus.txt", tmp_path / "vocab.txt"
    corpus.write_text("\n".join(CORPUS_LINES * 400) + "\n")  # shards of 64 KB: several
    vocab.write_text("\n".join(VOCAB_ENTRIES) + "\n")
    task = {"kind": feed.ENCODER_SIDE, "workers": 2, "model": str(roberta_dir)}
    task |= {"corpus": str(corpus), "vocab": str(vocab), "max_contexts": 40, "batch_tokens": 512}
    threads = torch.get_num_threads()
    try:
        alone = feed.run_encoder_side(task)
    finally:
        torch.set_num_threads(threads)
    config = DistillConfig(model=str(roberta_dir), max_contexts=40, workers=2, batch_tokens=512)
    model, tokenizer = load_pretrained(config)
    words = Vocabulary.from_entries(VOCAB_ENTRIES)
    real = distill_from_model(model, tokenizer, Corpus([corpus]), words, config).meta["stats"]
    assert len(plan_shards([corpus])) > 2
    assert alone["tokens"] == real["tokens"] > 0
    assert alone["padded_tokens"] >= alone["tokens"] and alone["batches"] > 0


@pytest.mark.parametrize("script", ["feed", "throughput", "start_up"])
def test_importing_a_benchmark_that_runs_workers_imports_no_torch(script):
    # Spawned worker processes import the benchmark's main module; distill's workers keep torch
    # out, and the benchmark must not bring it back in.
    code = f"import sys, {script}; print('torch' in sys.modules)"
    found = subprocess.run(
        [sys.executable, "-c", code], cwd=BENCHMARKS, capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("script", "arguments", "message"),
    [
        ("feed", ["--simulate-rate", "0"], "argument --simulate-rate: must be above 0, got 0"),
        ("feed", ["--simulate-rate", "-1"], "argument --simulate-rate: must be above 0, got -1"),
        ("feed", ["--workers", "1,0"], "argument --workers: must be above 0, got 0"),
        ("feed", ["--repeat", "0"], "argument --repeat: must be above 0, got 0"),
        ("feed", ["--batch-tokens", "0"], "argument --batch-tokens: must be above 0, got 0"),
        ("feed", ["--lines", "-1"], "argument --lines: must be above 0, got -1"),
        ("feed", ["--max-contexts", "-1"], "argument --max-contexts: must be 0 or more, got -1"),
        ("feed", ["--corpus", "missing.txt"], "missing.txt: no such file"),
        ("feed", ["--vocab", "EMPTY"], "EMPTY: no words in it"),
        ("throughput", ["--copies", "0"], "argument --copies: must be above 0, got 0"),
        ("start_up", ["--repeat", "0"], "argument --repeat: must be above 0, got 0"),
        ("start_up", ["--against", "missing"], "argument --against: missing holds no roberta_st"),
        (
            "throughput",
            ["--baseline-words", "0"],
            "argument --baseline-words: must be above 0, got 0",
        ),
        ("throughput", ["--scaling-lines", "0"], "argument --scaling-lines: must be above 0"),
        ("throughput", ["--peak-tflops", "-1"], "argument --peak-tflops: must be above 0"),
        ("throughput", ["--corpus", "EMPTY"], "EMPTY: no text in it"),
        ("throughput", ["--vocab", "missing.txt"], "missing.txt: no such file"),
        ("throughput", ["--corpus", "TEXT", "--workers", "0"], "workers: must be >= 1, got 0"),
        ("encoder_phases", ["--repeat", "0"], "argument --repeat: must be above 0, got 0"),
        ("encoder_phases", ["--lines", "-1"], "argument --lines: must be above 0, got -1"),
        ("encoder_phases", ["--lines", "3", "--dtype", "bogus"], "dtype: expected one of"),
    ],
)
def test_bad_arguments_stop_a_benchmark_at_once_with_one_line(tmp_path, script, arguments, message):
    files = {"EMPTY": tmp_path / "empty.txt", "TEXT": tmp_path / "text.txt"}
    files["EMPTY"].write_text("")
    files["TEXT"].write_text("The cat sat on the mat.\n")
    arguments = [str(files[item]) if item in files else item for item in arguments]
    message = message.replace("EMPTY", str(files["EMPTY"]))
    run = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{script}.py"), *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert run.stderr.strip().splitlines()[-1].startswith(f"{script}.py: error: {message}")
    assert "Traceback" not in run.stderr
    assert "(a)" not in run.stdout  # stopped before anything was measured


def test_run_to_run_reports_the_cosine_and_largest_difference_between_two_runs():
    from types import SimpleNamespace

    from throughput import run_to_run

    words = ["a", "b", "c"]
    first = SimpleNamespace(words=words, vectors=np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]))
    same = run_to_run(first, first, 1.0)
    assert "mean 1.0000000, min 1.0000000 over 2 words" in same
    assert same.endswith("difference 0.00e+00")
    turned = SimpleNamespace(words=words, vectors=np.array([[0.0, 1.0], [0.0, 2.0], [0.0, 0.0]]))
    apart = run_to_run(first, turned, 1.0)
    assert "mean 0.5000000, min 0.0000000 over 2 words" in apart
    assert apart.endswith("difference 1.00e+00")


def test_word_cosines_refuse_runs_of_different_entries():
    from types import SimpleNamespace

    from throughput import word_cosines

    first = SimpleNamespace(words=["a", "b"], vectors=np.eye(2))
    other = SimpleNamespace(words=["a", "c"], vectors=np.eye(2))
    assert word_cosines(first, first).tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="different entries"):
        word_cosines(first, other)


def test_the_ratio_to_the_original_is_left_out_when_its_sample_met_no_sentence():
    from throughput import versus_original

    assert versus_original(30.0, 2.0, passes=5) == "(a)/(b) = 15.0x in vocabulary words/s"
    assert "not measured" in versus_original(30.0, 900.0, passes=0)


def test_start_up_times_distill_with_this_tree_and_another(roberta_dir):
    # Each run is a fresh process with the tree's library first on its path.
    arguments = ["--model", str(roberta_dir), "--lines", "20", "--copies", "1", "--repeat", "1"]
    arguments += ["--workers", "2", "--against", str(BENCHMARKS.parent)]
    done = subprocess.run(
        [sys.executable, "start_up.py", *arguments],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        check=True,
    )
    runs = [line for line in done.stdout.splitlines() if "(model load included)" in line]
    assert [line.split("  ")[0] for line in runs] == [
        "--workers 2, this tree",
        f"--workers 2, {BENCHMARKS.parent.name}",
    ]
    assert "medians of 1 rounds:" in done.stdout


def test_start_up_stops_when_a_run_used_another_trees_library(roberta_dir, tmp_path):
    # A tree whose package hands over to this checkout's, as an installed copy first on the path
    # would: the comparison would be of one library with itself.
    real = BENCHMARKS.parent / "roberta_static" / "__init__.py"
    (tmp_path / "roberta_static").mkdir()
    (tmp_path / "roberta_static" / "__init__.py").write_text(
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('roberta_static', {str(real)!r}, "
        f"submodule_search_locations=[{str(real.parent)!r}])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules['roberta_static'] = module\n"
        "spec.loader.exec_module(module)\n"
    )
    arguments = ["--model", str(roberta_dir), "--lines", "20", "--copies", "1", "--repeat", "1"]
    arguments += ["--workers", "1", "--against", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "start_up.py", *arguments], cwd=BENCHMARKS, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f"one process, {tmp_path.name}: ran the library in {BENCHMARKS.parent}, not {tmp_path}"
    )
