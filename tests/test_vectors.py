from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from roberta_static.errors import OutputError, VectorsError
from roberta_static.formats.exports import FORMATS, export
from roberta_static.vectors.static import StaticVectors


def make_vectors():
    rng = np.random.default_rng(0)
    return StaticVectors(
        ["cat", "new york", "日本"], rng.normal(size=(3, 4)), np.array([2, 5, 0]), {"note": "x"}
    )


def test_save_load_round_trip(tmp_path):
    vecs = make_vectors()
    vecs.save(tmp_path / "out")
    back = StaticVectors.load(tmp_path / "out")
    assert back.words == vecs.words
    np.testing.assert_array_equal(back.vectors, vecs.vectors)
    np.testing.assert_array_equal(back.counts, vecs.counts)
    assert back.meta == {"format": "roberta-static vectors", "format_version": 1, "note": "x"}
    assert back.vectors.dtype == np.float32


def test_a_corpus_file_name_that_is_not_utf8_is_written_and_read_back(tmp_path):
    # A name with a byte that is not UTF-8 reaches Python as a lone surrogate; meta.json lists
    # every corpus file, so writing it failed at the end of a whole run.
    name = os.fsdecode(b"/corpus/caf\xe9.txt")
    vecs = StaticVectors(["a"], np.ones((1, 2)), np.ones(1), {"corpus": [{"path": name}]})
    vecs.save(tmp_path / "out")
    assert StaticVectors.load(tmp_path / "out").meta["corpus"] == [{"path": name}]
    assert os.fsencode(name) == b"/corpus/caf\xe9.txt"


def test_replaces_its_own_folder_only_with_overwrite(tmp_path):
    out = tmp_path / "out"
    make_vectors().save(out)
    with pytest.raises(OutputError, match="not empty; pass --overwrite"):
        make_vectors().save(out)
    inode = out.stat().st_ino
    make_vectors().save(out, overwrite=True)
    assert out.stat().st_ino != inode and (out / "vectors.npy").exists()


def test_nan_is_never_written_and_nothing_is_left_behind(tmp_path):
    vecs = make_vectors()
    vecs.vectors[1, 2] = np.nan
    with pytest.raises(VectorsError, match="1 of 3 vectors hold NaN"):
        vecs.save(tmp_path / "nested" / "out")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("words", "clash"),
    [
        (["cat", "cat"], "'cat' is there 2 times"),
        (["cat", "a\u2028b"], "'a\\u2028b' holds '\\u2028' (a line break)"),
        (["cat", "a\ud800"], "'a\\ud800' is not Unicode text (a lone surrogate)"),
    ],
)
def test_entries_a_folder_cannot_hold_are_never_written(tmp_path, words, clash):
    # vocab.tsv is read back line by line: such an entry came back as another, or broke it.
    vecs = StaticVectors(words, np.eye(2), np.ones(2))
    with pytest.raises(VectorsError) as refused:
        vecs.save(tmp_path / "out")
    assert str(refused.value) == (
        f"a vectors folder cannot hold every entry: {clash}; nothing written"
    )
    assert list(tmp_path.iterdir()) == []


def test_shape_mismatch_and_bad_folder(tmp_path):
    with pytest.raises(VectorsError, match="need a \\[2, D\\] matrix"):
        StaticVectors(["a", "b"], np.zeros((3, 2)), np.zeros(2))
    with pytest.raises(VectorsError, match="not a roberta-static vectors folder"):
        StaticVectors.load(tmp_path)


def test_malformed_vocab_file_and_output_path_that_is_a_file(tmp_path):
    make_vectors().save(tmp_path / "out")
    (tmp_path / "out" / "vocab.tsv").write_text("cat\t2\nnew york\n日本\t0\n")
    with pytest.raises(VectorsError, match="expected word<TAB>count on every line"):
        StaticVectors.load(tmp_path / "out")
    (tmp_path / "file").write_text("mine")
    with pytest.raises(OutputError, match="exists and is not a folder"):
        make_vectors().save(tmp_path / "file")
    assert (tmp_path / "file").read_text() == "mine"


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_full_disk_keeps_the_previous_output_and_says_so_in_one_line(tmp_path, monkeypatch):
    out = tmp_path / "out"
    make_vectors().save(out)
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    monkeypatch.setattr(np, "save", no_space)
    with pytest.raises(OutputError) as caught:
        make_vectors().save(out, overwrite=True)
    assert str(caught.value) == (
        f"{out}: writing failed (No space left on device); its previous contents are unchanged"
    )
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.fixture()
def pair():
    """Our vectors and gensim's KeyedVectors over the same rows, in the same order."""
    from gensim.models import KeyedVectors

    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(60)] + ["paris", "new york", "city"]
    matrix = rng.normal(size=(len(words), 16)).astype(np.float32)
    ours = StaticVectors(words, matrix, np.arange(len(words)), {"config": {"case": "lower"}})
    kv = KeyedVectors(16)
    kv.add_vectors(words, matrix)
    return ours, kv


def assert_same_neighbours(ours, theirs):
    assert [word for word, _ in ours] == [word for word, _ in theirs]
    np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], atol=1e-6)


def test_queries_answer_as_gensim_keyed_vectors(pair):
    ours, kv = pair
    vector = ours.vectors[5] * 3 - ours.vectors[7]
    for positive, negative in [
        ("paris", None),
        (["paris", "city"], ["w3"]),
        (vector, None),
        ([("paris", 2.0), "w1"], [("w2", -0.5)]),
        ([vector, "w9"], "w4"),
    ]:
        assert_same_neighbours(
            ours.most_similar(positive, negative, topn=7),
            kv.most_similar(positive, negative, topn=7),
        )
    assert_same_neighbours(ours.most_similar("w0", topn=100), kv.most_similar("w0", topn=100))
    np.testing.assert_allclose(
        ours.most_similar("city", topn=None), kv.most_similar("city", topn=None), atol=1e-6
    )
    assert ours.most_similar("city", topn=0) == []
    assert ours.similarity("paris", "new york") == pytest.approx(
        kv.similarity("paris", "new york"), abs=1e-6
    )
    assert ours.similarity(vector, "w1") == pytest.approx(
        float(vector @ kv.get_vector("w1", norm=True) / np.linalg.norm(vector)), abs=1e-6
    )
    np.testing.assert_allclose(ours.get_vector("w8", norm=True), kv.get_vector("w8", norm=True))
    np.testing.assert_array_equal(ours.get_vector("w8"), kv["w8"])
    np.testing.assert_array_equal(ours[["w1", "paris"]], kv[["w1", "paris"]])
    with pytest.raises(ValueError, match="read-only"):
        ours["w8"][0] = 1.0
    from roberta_static.errors import ConfigError

    with pytest.raises(ConfigError, match="vector of width 16"):
        ours.most_similar(np.zeros(3))


def test_lookups_follow_the_case_policy_and_the_phrase_spelling():
    matrix = np.eye(3, dtype=np.float32)
    lower = StaticVectors(
        ["paris", "new york", "u_boat"], matrix, np.ones(3), {"config": {"case": "lower"}}
    )
    assert "Paris" in lower and "PARIS" in lower and "New  York" in lower and "new_york" in lower
    assert "U_Boat" in lower and 3 not in lower
    np.testing.assert_array_equal(lower["New_York"], matrix[1])
    assert [w for w, _ in lower.most_similar("Paris", topn=5)] == ["new york", "u_boat"]
    keep = StaticVectors(["Paris", "paris"], matrix[:2], np.ones(2), {"config": {"case": "keep"}})
    assert "PARIS" not in keep
    np.testing.assert_array_equal(keep["paris"], matrix[1])
    with pytest.raises(KeyError) as caught:
        lower.get_vector("zebra")
    assert str(caught.value) == "'zebra' has no vector (looked up lower-cased)"
    from roberta_static.errors import KeyNotFoundError

    with pytest.raises(KeyNotFoundError, match="^'PARIS' has no vector$"):
        keep.most_similar(["Paris", "PARIS"])


def test_memory_mapped_load_answers_the_same(pair, tmp_path):
    ours, _ = pair
    ours.save(tmp_path / "out")
    mapped = StaticVectors.load(tmp_path / "out", mmap=True)
    assert isinstance(mapped.vectors.base, np.memmap) and not mapped.vectors.flags.writeable
    assert mapped.most_similar("Paris") == ours.most_similar("paris")
    loaded = StaticVectors.load(tmp_path / "out")
    assert loaded.vectors.flags.writeable and not isinstance(loaded.vectors.base, np.memmap)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_loading_and_querying_import_neither_torch_transformers_nor_spacy(pair, tmp_path, fmt):
    import subprocess
    import sys

    pair[0].save(tmp_path / "out")
    if fmt != "native":
        export(tmp_path / "out", [fmt])
    script = (
        "import sys, roberta_static\n"
        "vecs = roberta_static.StaticVectors.load(sys.argv[1], mmap=True, allow_pickle=True)\n"
        "vecs.most_similar('paris'), vecs.similarity('paris', 'city'), vecs['new york']\n"
        "print(sorted(m for m in ('torch', 'transformers', 'spacy', 'gensim') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "out" / FORMATS[fmt].path)],
        capture_output=True,
        text=True,
        check=True,
    )
    # Only gensim's own files need gensim.
    assert done.stdout.strip() == ("['gensim']" if FORMATS[fmt].family == "gensim" else "[]")


def test_gensim_names_and_iteration(pair):
    ours, kv = pair
    assert list(ours) == ours.index_to_key == kv.index_to_key
    assert ours.key_to_index == kv.key_to_index and ours.vector_size == kv.vector_size == 16
    with pytest.raises(TypeError):
        ours.key_to_index["w0"] = 5  # read-only: lookups must not go stale
    from roberta_static.errors import KeyNotFoundError

    hint = r"^0 is not a word or phrase \(keys are strings; row i is \.vectors\[i\], its entry"
    for lookup in (lambda: ours[0], lambda: ours[[0, 1]], lambda: ours.get_vector(np.int64(0))):
        with pytest.raises(KeyNotFoundError, match=hint):
            lookup()


def test_restrict_vocab_searches_the_most_frequent_entries(pair):
    ours, _ = pair
    ours.counts = ours.counts[::-1].copy()  # rows in neither count order: the middle counts most
    ours.counts[20:30] += 1000
    most_frequent = {ours.words[i] for i in range(20, 30)}
    kv = ours.to_keyed_vectors()  # sorted by count: its first N rows are the N most frequent
    for query in ("w25", "w0", ours.vectors[3]):
        found = ours.most_similar(query, topn=4, restrict_vocab=10)
        assert {word for word, _ in found} <= most_frequent
        assert_same_neighbours(found, kv.most_similar(query, topn=4, restrict_vocab=10))
    assert len(ours.most_similar("w25", topn=20, restrict_vocab=10)) == 9
    from roberta_static.errors import ConfigError

    with pytest.raises(ConfigError, match="^restrict_vocab: must be >= 1, got 0$"):
        ours.most_similar("w1", restrict_vocab=0)
    with pytest.raises(ConfigError, match="^restrict_vocab: needs a topn"):
        ours.most_similar("w1", topn=None, restrict_vocab=10)
