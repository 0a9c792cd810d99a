from __future__ import annotations

import sys

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
