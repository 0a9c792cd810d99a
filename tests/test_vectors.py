from __future__ import annotations

import errno

import numpy as np
import pytest

from roberta_static.errors import OutputError, VectorsError
from roberta_static.vectors import StaticVectors


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
