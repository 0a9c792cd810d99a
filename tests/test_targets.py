"""Sentence targets: the bottom-k sample, its merge in any split, and the targets/ folder."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roberta_static.errors import ConfigError, VectorsError
from roberta_static.vectors.target_files import (
    TARGETS_DIR,
    has_targets,
    read_targets,
    write_targets,
)
from roberta_static.vectors.targets import SentenceTargets, sentence_key, sentence_keys

DIM = 3
WORDS = [f"w{i}" for i in range(12)]


def sentences(texts: list[str]) -> dict[str, np.ndarray]:
    """Made-up batch arrays: each text's vector and entries follow from the text alone."""
    keys = sentence_keys(texts)
    vectors = np.array([[len(t), t.count("a"), keys[i] % 97] for i, t in enumerate(texts)])
    entries = [sorted({len(word) % 12 for word in t.split()}) for t in texts]
    counts = [[1 + e % 3 for e in row] for row in entries]
    indptr = np.cumsum([0] + [len(row) for row in entries])
    return {
        "keys": keys,
        "vectors": vectors.astype(np.float32),
        "indptr": indptr,
        "entries": np.array([e for row in entries for e in row], dtype=np.int64),
        "counts": np.array([c for row in counts for c in row], dtype=np.int64),
    }


def sample_of(texts: list[str], limit: int, batch: int = 3) -> SentenceTargets:
    sample = SentenceTargets(limit, DIM, {"mode": "mean"})
    for start in range(0, len(texts), batch):
        sample.add(**sentences(texts[start : start + batch]))
    return sample


def naive_bottom(texts: list[str], limit: int) -> list[str]:
    """The texts of the ``limit`` smallest keys, each text once."""
    return sorted(set(texts), key=sentence_key)[:limit]


def assert_same(a: SentenceTargets, b: SentenceTargets) -> None:
    for name in ("keys", "vectors", "indptr", "entries", "counts"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.offered == b.offered


TEXTS = [f"sentence {i} about a cat {'and a dog ' * (i % 4)}" for i in range(40)]


def test_keys_are_stable_64_bit_hashes_of_the_text():
    assert sentence_key("The cat sat.") == sentence_key("The cat sat.")
    assert sentence_key("The cat sat.") != sentence_key("The cat sat")
    assert sentence_keys(["a", "b"]).dtype == np.uint64
    assert sentence_key("a") < 2**64


def test_the_sample_keeps_the_smallest_keys_each_text_once():
    texts = TEXTS + TEXTS[:10]  # repeated texts are kept once
    sample = sample_of(texts, limit=7)
    expected = naive_bottom(texts, 7)
    assert sample.keys.tolist() == [sentence_key(t) for t in expected]
    assert len(sample) == 7
    assert sample.offered == len(texts)
    reference = sentences(expected)
    np.testing.assert_array_equal(sample.vectors, reference["vectors"])
    np.testing.assert_array_equal(sample.entries, reference["entries"])


def test_fewer_sentences_than_the_limit_are_all_kept():
    sample = sample_of(TEXTS[:5], limit=100)
    assert sorted(sample.keys.tolist()) == sample.keys.tolist()
    assert len(sample) == 5


def test_repeated_entries_in_a_sentence_add_their_counts_and_come_out_ascending():
    sample = SentenceTargets(5, 1)
    sample.add(np.array([1], np.uint64), [[0.5]], [0, 3], [4, 2, 4], [1, 1, 2])
    assert sample.entries.tolist() == [2, 4]
    assert sample.counts.tolist() == [1, 3]
    assert [row.tolist() for row in sample.sentence(0)] == [[2, 4], [1, 3]]


def test_wanted_tells_which_keys_can_still_enter():
    sample = sample_of(TEXTS, limit=4)
    largest = int(sample.keys[-1])
    keys = np.array([largest - 1, largest, largest + 1], dtype=np.uint64)
    assert sample.wanted(keys).tolist() == [True, False, False]


@settings(max_examples=60, deadline=None)
@given(
    cuts=st.lists(st.integers(0, len(TEXTS)), max_size=5),
    limit=st.integers(1, 20),
    batch=st.integers(1, 7),
    repeats=st.lists(st.integers(0, len(TEXTS) - 1), max_size=8),
)
def test_merging_the_parts_of_any_split_gives_the_whole(cuts, limit, batch, repeats):
    texts = TEXTS + [TEXTS[i] for i in repeats]
    whole = sample_of(texts, limit, batch)
    bounds = [0, *sorted(cuts), len(texts)]
    parts = [sample_of(texts[a:b], limit, batch) for a, b in zip(bounds, bounds[1:], strict=False)]
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.merge(part)
    assert_same(merged, whole)
    assert whole.keys.tolist() == [sentence_key(t) for t in naive_bottom(texts, limit)]


def test_samples_of_other_settings_do_not_merge():
    with pytest.raises(ConfigError, match="different limit"):
        SentenceTargets(3, DIM).merge(SentenceTargets(4, DIM))
    with pytest.raises(ConfigError, match="different pooling"):
        SentenceTargets(3, DIM, {"mode": "mean"}).merge(SentenceTargets(3, DIM, {"mode": "cls"}))


def test_bad_batches_are_refused():
    sample = SentenceTargets(3, 2)
    keys = np.array([1, 2], np.uint64)
    with pytest.raises(ConfigError, match=r"\[2, 2\] vectors"):
        sample.add(keys, np.zeros((2, 3)), [0, 1, 2], [0, 1], [1, 1])
    with pytest.raises(ConfigError, match="indptr"):
        sample.add(keys, np.zeros((2, 2)), [0, 2], [0, 1], [1, 1])
    with pytest.raises(ConfigError, match="counts >= 1"):
        sample.add(keys, np.zeros((2, 2)), [0, 1, 2], [0, 1], [1, 0])
    with pytest.raises(ConfigError, match="sentence_targets: must be >= 1"):
        SentenceTargets(0, 2)


def test_reindexing_renames_entries_and_drops_those_mapped_away():
    sample = SentenceTargets(5, 1)
    sample.add(np.array([1, 2], np.uint64), [[0.0], [1.0]], [0, 2, 3], [0, 3, 3], [1, 2, 5])
    renamed = sample.reindexed(np.array([1, -1, -1, 0]))
    assert renamed.indptr.tolist() == [0, 2, 3]
    assert renamed.entries.tolist() == [0, 1, 0]  # ascending within each sentence
    assert renamed.counts.tolist() == [2, 1, 5]
    dropped = sample.reindexed(np.array([0, -1, -1, -1]))
    assert dropped.indptr.tolist() == [0, 1, 1]  # a sentence left without entries stays


def test_the_folder_round_trips(tmp_path):
    sample = sample_of(TEXTS, limit=9)
    folder = write_targets(sample, tmp_path, WORDS)
    assert folder == tmp_path / TARGETS_DIR and has_targets(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == [
        "counts.npy",
        "entries.npy",
        "indptr.npy",
        "keys.npy",
        "meta.json",
        "vectors.npy",
    ]
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["sentences"] == 9 and meta["dim"] == DIM and meta["limit"] == 9
    assert meta["pooling"] == {"mode": "mean"} and meta["offered"] == len(TEXTS)
    assert "bottom-k" in meta["sampling"]
    back = read_targets(tmp_path, WORDS)
    assert_same(back, sample)
    assert back.pooling == sample.pooling
    # Read back, it is a sample like any other: it merges and takes more sentences.
    assert_same(back.merge(sample_of(TEXTS[:3], 9)), sample.merge(sample_of(TEXTS[:3], 9)))


def test_writing_refuses_entries_that_are_not_rows(tmp_path):
    with pytest.raises(VectorsError, match=r"entry row \d+, but the vectors have 5 rows"):
        write_targets(sample_of(TEXTS, limit=40), tmp_path, WORDS[:5])
    assert not has_targets(tmp_path)


def test_a_folder_without_targets_is_named(tmp_path):
    with pytest.raises(VectorsError, match=r"holds no sentence targets \(targets/\); distill"):
        read_targets(tmp_path)


def test_targets_of_other_vectors_are_refused(tmp_path):
    write_targets(sample_of(TEXTS, limit=9), tmp_path, WORDS)
    with pytest.raises(VectorsError, match="written for other vectors"):
        read_targets(tmp_path, list(reversed(WORDS)))
    with pytest.raises(VectorsError, match="written for other vectors"):
        read_targets(tmp_path, WORDS + ["more"])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f: (f / "keys.npy").unlink(), r"keys.npy: cannot read it"),
        (lambda f: np.save(f / "keys.npy", np.arange(9)), "keys.npy: expected uint64, found int64"),
        (
            lambda f: np.save(f / "keys.npy", np.zeros(9, np.uint64)),
            "keys.npy must be ascending with no key twice",
        ),
        (
            lambda f: np.save(f / "vectors.npy", np.zeros((9, 2), np.float32)),
            r"vectors.npy is \(9, 2\), expected \(9, 3\)",
        ),
        (
            lambda f: np.save(f / "vectors.npy", np.full((9, 3), np.nan, np.float32)),
            "9 of 9 sentence vectors hold NaN or Inf",
        ),
        (lambda f: np.save(f / "indptr.npy", np.arange(10) * 100), "indptr must rise"),
        (lambda f: (f / "meta.json").write_text("{}"), "not the meta.json of sentence targets"),
        (lambda f: (f / "meta.json").write_text("{"), "meta.json: cannot read it"),
        (lambda f: (f / "vectors.npy").write_bytes(b"x"), "vectors.npy: cannot read it"),
    ],
)
def test_damaged_folders_are_one_line_errors(tmp_path, damage, message):
    folder = write_targets(sample_of(TEXTS, limit=9), tmp_path, WORDS)
    damage(folder)
    with pytest.raises(VectorsError, match=message) as error:
        read_targets(tmp_path, WORDS)
    assert "\n" not in str(error.value)


def test_a_pickled_array_is_never_unpickled(tmp_path):
    # Targets hold numbers only: there is no option to unpickle, so a pickle planted in a
    # folder (code that would run on loading) is refused unread.
    folder = write_targets(sample_of(TEXTS, limit=9), tmp_path, WORDS)
    np.save(folder / "counts.npy", np.array([object()] * 3), allow_pickle=True)
    with pytest.raises(VectorsError, match="counts.npy: cannot read it .*allow_pickle=False"):
        read_targets(tmp_path, WORDS)


def test_a_long_stream_sorts_its_waiting_sentences_in_as_it_goes():
    texts = [f"line {i} of a long stream" for i in range(700)]
    sample = sample_of(texts, limit=10, batch=50)
    assert sample.keys.tolist() == [sentence_key(t) for t in naive_bottom(texts, 10)]
