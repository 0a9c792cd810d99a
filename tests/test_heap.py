from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from roberta_static.engine import heap


@pytest.fixture
def trims(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(heap, "_malloc_trim", calls.append)
    monkeypatch.setattr(heap, "_last_trim", 0.0)
    return calls


def test_the_heap_is_trimmed_at_most_once_in_its_interval(trims, monkeypatch):
    clock = iter([100.0, 101.0, 100.0 + heap.TRIM_SECONDS + 1, 100.0 + heap.TRIM_SECONDS + 2])
    monkeypatch.setattr(heap.time, "monotonic", lambda: next(clock))
    for _ in range(4):
        heap.trim_heap()
    assert trims == [0, 0]


def test_a_trim_asked_for_now_comes_within_the_interval(trims, monkeypatch):
    monkeypatch.setattr(heap.time, "monotonic", lambda: 100.0)
    heap.trim_heap()
    heap.trim_heap()
    heap.trim_heap(now=True)
    assert trims == [0, 0]


def test_a_periodic_checkpoint_is_followed_at_once_by_a_trim(
    trims, monkeypatch, tmp_path, roberta_dir, corpus_file, vocab_file
):
    """The snapshot a save copies the sums into is freed right after it: its pages go back then,
    not up to TRIM_SECONDS later (which held them for half of a long run with workers)."""
    from roberta_static import DistillConfig, distill
    from roberta_static.engine import checkpoint
    from roberta_static.stopping import Checkpointing

    events: list[str] = []
    monkeypatch.setattr(heap, "TRIM_SECONDS", 1e9)  # no periodic trim: only those asked now
    monkeypatch.setattr(heap, "_malloc_trim", lambda pad: events.append("trim"))
    save = checkpoint.save_checkpoint
    monkeypatch.setattr(
        checkpoint, "save_checkpoint", lambda *args: events.append("save") or save(*args)
    )
    config = DistillConfig(model=str(roberta_dir), workers=1)
    distill(corpus_file, vocab_file, config, checkpointing=Checkpointing(tmp_path, 1e-9))
    saves = [index for index, event in enumerate(events) if event == "save"]
    assert saves
    assert all(events[index + 1 : index + 2] == ["trim"] for index in saves)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_glibc_trim_is_found_on_linux():
    assert heap._malloc_trim is not None or "musl" in sys.version


def test_a_pass_trims_the_heap_where_it_reads_encodes_and_loops(
    monkeypatch, roberta_dir, corpus_file, vocab_file
):
    """The pass loop, the producer and the encoder step each trim, so every process of an engine
    does (the driver, a worker or Ray task reading, an encoder thread or Ray actor)."""
    from roberta_static import DistillConfig, distill
    from roberta_static.engine import loop, producer, step

    callers: list[str] = []
    for module in (loop, producer, step):
        monkeypatch.setattr(module, "trim_heap", lambda name=module.__name__: callers.append(name))
    distill(corpus_file, vocab_file, DistillConfig(model=str(roberta_dir), workers=1))
    assert set(callers) == {loop.__name__, producer.__name__, step.__name__}


@pytest.fixture
def mallopts(monkeypatch):
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(heap, "_mallopt", lambda *args: calls.append(args) or 1)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    return calls


def test_the_mmap_threshold_is_fixed_at_glibcs_initial_value(mallopts):
    assert heap.fix_mmap_threshold()
    assert mallopts == [(-3, 128 * 1024)]  # M_MMAP_THRESHOLD, from glibc's <malloc.h>


def test_a_users_mmap_threshold_rules(mallopts, monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "4194304")
    assert not heap.fix_mmap_threshold()
    assert mallopts == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_fixing_the_threshold_keeps_large_blocks_out_of_the_heap():
    fix = "from roberta_static.engine.heap import fix_mmap_threshold; fix_mmap_threshold(); "
    probe = "from worker_probe import mmap_threshold_fixed; print(mmap_threshold_fixed())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), *sys.path])
    outputs = [
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        for code in (probe, fix + probe)
    ]
    assert outputs == ["False", "True"]
