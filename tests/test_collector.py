"""A pass leaves the loaded heap out of Python's full collections, and hands it back after."""

from __future__ import annotations

import gc

from roberta_static import DistillConfig, distill


def _freeze_counts_of_a_pass(roberta_dir, corpus_file, vocab_file) -> list[int]:
    during: list[int] = []
    config = DistillConfig(model=str(roberta_dir), layers="1")
    distill(
        corpus_file, vocab_file, config, progress=lambda _: during.append(gc.get_freeze_count())
    )
    assert during
    return during


def test_a_pass_freezes_what_was_loaded_and_unfreezes_it_at_its_end(
    roberta_dir, corpus_file, vocab_file
):
    assert gc.get_freeze_count() == 0
    during = _freeze_counts_of_a_pass(roberta_dir, corpus_file, vocab_file)
    assert min(during) > 10_000  # the model, tokenizer and spaCy's pipeline at least
    assert gc.get_freeze_count() == 0


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
