"""benchmarks/feed.py (and throughput.py): the simulated device, what worker processes import,
arguments, the run-to-run figure."""

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


@pytest.mark.parametrize("script", ["feed", "throughput"])
def test_importing_a_benchmark_that_runs_workers_imports_no_torch(script):
    # Spawned worker processes import the benchmark's main module; distill's workers keep torch
    # out, and the benchmark must not bring it back in.
    code = f"import sys, {script}; print('torch' in sys.modules)"
    found = subprocess.run(
        [sys.executable, "-c", code], cwd=BENCHMARKS, capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--simulate-rate", "0"], "argument --simulate-rate: must be above 0, got 0"),
        (["--simulate-rate", "-1"], "argument --simulate-rate: must be above 0, got -1"),
        (["--workers", "1,0"], "argument --workers: must be above 0, got 0"),
        (["--repeat", "0"], "argument --repeat: must be above 0, got 0"),
        (["--corpus", "missing.txt"], "missing.txt: no such file"),
        (["--vocab", "EMPTY"], "EMPTY: no words in it"),
    ],
)
def test_bad_arguments_stop_feed_at_once_with_one_line(tmp_path, arguments, message):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    arguments = [str(empty) if item == "EMPTY" else item for item in arguments]
    message = message.replace("EMPTY", str(empty))
    run = subprocess.run(
        [sys.executable, str(BENCHMARKS / "feed.py"), *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert run.stderr.strip().splitlines()[-1] == f"feed.py: error: {message}"
    assert run.stdout == ""


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
