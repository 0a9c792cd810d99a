from __future__ import annotations

import numpy as np
import pytest
from gensim.models import KeyedVectors

from roberta_static.errors import ConfigError, VectorsError
from roberta_static.formats.exports import FORMATS, export
from roberta_static.vectors.static import StaticVectors

GENSIM_FORMATS = [name for name, spec in FORMATS.items() if spec.family == "gensim"]


def load_keyed_vectors(path, allow_pickle=False):
    return StaticVectors.load(path, allow_pickle=allow_pickle).to_keyed_vectors()


@pytest.fixture()
def vectors():
    rng = np.random.default_rng(1)
    words = ["cat", "dog", "new york", "tiger"]
    matrix = rng.normal(size=(4, 8)).astype(np.float32)
    matrix[3] = matrix[0] + 0.01  # tiger is next to cat
    return StaticVectors(words, matrix, np.array([3, 7, 1, 5]))


def test_keyed_vectors_sorted_by_count_with_counts(vectors):
    kv = vectors.to_keyed_vectors()
    assert kv.index_to_key == ["dog", "tiger", "cat", "new york"]
    assert [kv.get_vecattr(k, "count") for k in kv.index_to_key] == [7, 5, 3, 1]
    np.testing.assert_array_equal(kv["new york"], vectors["new york"])
    assert kv.most_similar("cat", topn=1)[0][0] == "tiger"
    assert kv.most_similar("cat", topn=1, restrict_vocab=1)[0][0] == "dog"


def test_every_export_loads_in_gensim(vectors, tmp_path):
    vectors.save(tmp_path / "out")
    export(tmp_path / "out", GENSIM_FORMATS)
    kv = KeyedVectors.load(str(tmp_path / "out" / "vectors.kv"))
    text = KeyedVectors.load_word2vec_format(str(tmp_path / "out" / "vectors.txt"))
    binary = KeyedVectors.load_word2vec_format(str(tmp_path / "out" / "vectors.bin"), binary=True)
    assert kv.index_to_key[2] == "cat" and "new york" in kv
    for loaded in (text, binary):
        assert loaded.index_to_key == ["dog", "tiger", "cat", "new_york"]
        np.testing.assert_allclose(
            loaded["new_york"], vectors["new york"], atol=1e-6 if loaded is binary else 1e-5
        )
        assert loaded.most_similar("cat", topn=1)[0][0] == "tiger"
    with pytest.raises(VectorsError, match="exists; pass --overwrite"):
        export(tmp_path / "out", ["word2vec"])


def test_loader_refuses_pickles_unless_allowed(vectors, tmp_path):
    vectors.save(tmp_path / "out")
    export(tmp_path / "out", ["kv"])
    with pytest.raises(ConfigError, match="^allow_pickle: needed for .*vectors.kv, a pickle"):
        load_keyed_vectors(tmp_path / "out" / "vectors.kv")
    assert "cat" in load_keyed_vectors(tmp_path / "out" / "vectors.kv", allow_pickle=True)
    assert load_keyed_vectors(tmp_path / "out").index_to_key[0] == "dog"


def test_unknown_format_and_non_word2vec_file(tmp_path):
    from roberta_static.errors import ConfigError
    from roberta_static.formats.exports import parse_formats

    with pytest.raises(ConfigError, match=r"formats: unknown \['glove'\]"):
        parse_formats("kv,glove")
    bad = tmp_path / "notes.txt"
    bad.write_text("just some words\nand more\n")
    with pytest.raises(VectorsError, match="not a word2vec file"):
        load_keyed_vectors(bad)


def test_word2vec_exports_keep_the_real_counts_in_a_vocab_file(vectors, tmp_path):
    from roberta_static.formats.gensim import counts_path

    vectors.save(tmp_path / "out")
    written = export(tmp_path / "out", ["word2vec", "word2vec-bin"])
    counts_file = tmp_path / "out" / "vectors.vocab"
    assert counts_file in written and counts_path(tmp_path / "out" / "vectors.bin") == counts_file
    real = {w.replace(" ", "_"): int(c) for w, c in zip(vectors.words, vectors.counts, strict=True)}
    for name, binary in (("vectors.txt", False), ("vectors.bin", True)):
        path = str(tmp_path / "out" / name)
        bare = KeyedVectors.load_word2vec_format(path, binary=binary)
        stand_ins = {key: bare.get_vecattr(key, "count") for key in bare.index_to_key}
        assert stand_ins != real  # gensim's rank-based stand-ins, without the vocab file
        with_counts = KeyedVectors.load_word2vec_format(
            path, binary=binary, fvocab=str(counts_file)
        )
        assert {key: with_counts.get_vecattr(key, "count") for key in real} == real
        ours = load_keyed_vectors(path)
        assert {key: ours.get_vecattr(key, "count") for key in real} == real
