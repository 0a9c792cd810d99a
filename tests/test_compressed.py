"""A compressed corpus file is known whole or cut short from its end, without reading it all."""

from __future__ import annotations

import bz2
import gzip
import lzma

import numpy as np
import pytest

from roberta_static.text import compressed
from roberta_static.text.compressed import is_whole

COMPRESSORS = {
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".gz (level 1)": lambda data: gzip.compress(data, compresslevel=1),
}


@pytest.fixture(scope="module")
def text() -> bytes:
    """About 1 MB of made-up words: its .gz is larger than the tail searched for blocks."""
    rng = np.random.default_rng(0)
    letters = rng.integers(ord("a"), ord("z") + 1, 1_000_000, dtype=np.uint8)
    letters[rng.random(len(letters)) < 0.18] = ord(" ")
    letters[rng.random(len(letters)) < 0.01] = ord("\n")
    return letters.tobytes()


def _write(tmp_path, fmt: str, data: bytes):
    path = tmp_path / f"corpus.txt{fmt.split(' ')[0]}"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("fmt", list(COMPRESSORS))
@pytest.mark.parametrize("size", ["empty", "small", "large"])
def test_a_whole_file_passes_and_every_cut_fails(fmt, size, text, tmp_path):
    data = {"empty": b"", "small": text[:5000], "large": text}[size]
    whole = COMPRESSORS[fmt](data)
    assert is_whole(_write(tmp_path, fmt, whole))
    for cut in sorted({1, 4, 8, 9, 12, 100, 5000, len(whole) // 2, len(whole) - 10}):
        if 0 < cut < len(whole):
            assert not is_whole(_write(tmp_path, fmt, whole[:-cut])), cut


def test_a_large_gzip_file_is_settled_by_its_tail_alone(text, tmp_path, monkeypatch):
    def read_whole(path):
        raise AssertionError("the whole file was decompressed")

    whole = gzip.compress(text)
    assert len(whole) > 2 * compressed._TAIL_BYTES
    monkeypatch.setattr(compressed, "_gzip_decompresses", read_whole)
    assert is_whole(_write(tmp_path, ".gz", whole))
    for cut in (1000, len(whole) // 2):
        assert not is_whole(_write(tmp_path, ".gz", whole[:-cut]))


def test_concatenated_streams_and_padding_are_whole(text, tmp_path):
    members = gzip.compress(text) + gzip.compress(b"") + gzip.compress(b"more") + bytes(10)
    assert is_whole(_write(tmp_path, ".gz", members))
    assert is_whole(_write(tmp_path, ".bz2", bz2.compress(text) + bz2.compress(b"more")))
    assert is_whole(_write(tmp_path, ".xz", lzma.compress(text) + bytes(8)))
    assert not is_whole(_write(tmp_path, ".xz", lzma.compress(text) + bytes(6)))  # not xz padding
    assert not is_whole(_write(tmp_path, ".gz", members[: -10 - 5]))  # the last member cut


def test_other_files_are_not_checked(tmp_path):
    assert is_whole(_write(tmp_path, ".txt", b"\x1f\x8bnot really gzip"))
