"""A pass leaves the loaded heap out of Python's full collections, and hands it back after."""

from __future__ import annotations

import gc

import pytest

from roberta_static import DistillConfig, distill
from roberta_static.model.loading import load_pretrained


@pytest.fixture(autouse=True)
def _nothing_frozen():
    # A CLI test stopped by a signal freezes the heap for the exit it never makes in-process
    # (cli/_util.py's stop_on_signals); each test here starts as a fresh process does.
    gc.unfreeze()


def _freeze_counts_of_a_pass(roberta_dir, corpus_file, vocab_file) -> list[int]:
    during: list[int] = []
    config = DistillConfig(model=str(roberta_dir), layers="1")
    distill(
        corpus_file, vocab_file, config, progress=lambda _: during.append(gc.get_freeze_count())
    )
    assert during
    return during


def test_a_run_freezes_what_was_loaded_and_unfreezes_it_at_its_end(
    roberta_dir, corpus_file, vocab_file, monkeypatch
):
    loaded = []

    def load(config):
        model, tokenizer = load_pretrained(config)
        loaded.append(model)
        return model, tokenizer

    monkeypatch.setattr("roberta_static.api.load_pretrained", load)
    assert gc.get_freeze_count() == 0
    model_frozen = []
    config = DistillConfig(model=str(roberta_dir), layers="1")

    def progress(_):
        model_frozen.append(all(found is not loaded[0] for found in gc.get_objects()))

    distill(corpus_file, vocab_file, config, progress=progress)
    # The libraries' objects from the start, the model, loaded since, once it is.
    assert model_frozen and all(model_frozen)
    assert gc.get_freeze_count() == 0
    assert any(found is loaded[0] for found in gc.get_objects())


def test_a_caller_s_own_freeze_is_kept(roberta_dir, corpus_file, vocab_file):
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        during = _freeze_counts_of_a_pass(roberta_dir, corpus_file, vocab_file)
        # Nothing more frozen (the model loaded since would be), nothing unfrozen after: the
        # count only falls as frozen objects are freed.
        assert max(during) <= frozen
        assert gc.get_freeze_count() > frozen // 2
    finally:
        gc.unfreeze()


def test_a_collector_turned_off_is_left_alone(roberta_dir, corpus_file, vocab_file):
    gc.disable()
    try:
        assert set(_freeze_counts_of_a_pass(roberta_dir, corpus_file, vocab_file)) == {0}
        assert not gc.isenabled()
    finally:
        gc.enable()
