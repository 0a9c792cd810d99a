"""The formats registry: every format we write reads back."""

from __future__ import annotations

import numpy as np
import pytest

from roberta_static.errors import VectorsError
from roberta_static.formats.exports import EXPORTS, FORMATS, export
from roberta_static.vectors.data import rank_counts
from roberta_static.vectors.static import StaticVectors

WORDS = ["the", "cat", "dog", "new york", "paris", "city", "kitten", "puppy", "town", "zebra"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A tiny vectors folder (one entry filled, count 0) with every export beside it."""
    rng = np.random.default_rng(7)
    meta = {
        "config": {"case": "lower", "layers": "all", "combine": "mean", "pool": "mean"},
        "model": {"name": "tiny/model", "sha256": "abc123"},
        "corpus": [{"path": "corpus.txt", "bytes": 42}],
    }
    counts = np.array([90, 12, 7, 3, 20, 5, 2, 2, 9, 0])
    vectors = StaticVectors(WORDS, rng.normal(size=(len(WORDS), 8)), counts, meta)
    path = tmp_path_factory.mktemp("formats") / "vectors"
    vectors.save(path)
    export(path, EXPORTS)
    return path


def at(folder, fmt):
    return folder / FORMATS[fmt].path


def spelled(word: str, fmt: str) -> str:
    """An entry as the format writes it: phrases joined by ``_`` outside native and .kv."""
    return word if fmt in ("native", "kv") else word.replace(" ", "_")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_reads_back_its_entries_vectors_counts_and_meta(folder, fmt):
    source = StaticVectors.load(folder)
    read = StaticVectors.load(at(folder, fmt), allow_pickle=True)
    family = FORMATS[fmt].family
    rows = source.rows_by_count if family == "gensim" else np.arange(len(source))  # gensim sorts
    assert read.words == [spelled(source.words[row], fmt) for row in rows]
    np.testing.assert_allclose(read.vectors, source.vectors[rows], atol=1e-6)
    counts = rank_counts(len(rows)) if family == "static_encoder" else source.counts[rows]
    np.testing.assert_array_equal(read.counts, counts)
    assert read.meta == ({} if family == "gensim" else source.meta)  # a model card carries it
    np.testing.assert_allclose(read["New York"], source["new york"], atol=1e-6)


def test_a_path_of_no_format_is_one_line_naming_it(folder, tmp_path):
    with pytest.raises(VectorsError, match=r"nope: no such vectors folder or file$"):
        StaticVectors.load(tmp_path / "nope")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("buy milk\n")
    with pytest.raises(
        VectorsError,
        match=r"notes: not a roberta-static vectors folder \(no vectors.npy\), nor a model2vec or "
        "sentence-transformers folder$",
    ):
        StaticVectors.load(tmp_path / "notes")
    transformer = tmp_path / "st"
    transformer.mkdir()
    (transformer / "config_sentence_transformers.json").write_text("{}")
    (transformer / "modules.json").write_text('[{"path": "", "type": "Transformer"}]')
    with pytest.raises(VectorsError, match="st: a sentence-transformers model without a Static"):
        StaticVectors.load(transformer)
    # export() adds exports to a vectors folder only, never into an export.
    with pytest.raises(VectorsError, match="model2vec: not a roberta-static vectors folder"):
        export(at(folder, "model2vec"), ["kv"])
