"""meta.json values for people: words, units, three significant digits; what `info` prints."""

from __future__ import annotations

import re

import numpy as np
import pytest
from typer.testing import CliRunner

from roberta_static.cli import app
from roberta_static.readable import duration, label, number, rows, value_text
from roberta_static.vectors.static import StaticVectors

META = {
    "model": {"name": "minilm", "type": "bert", "layers_used": [0, 1, 2], "revision": None},
    "config": {"model": "minilm", "batch_tokens": None, "max_contexts": 2000, "center": False},
    "stats": {
        "tokens": 33415,
        "encoder_wait_seconds": 0.25246325500029343,
        "seconds": 28.026,
        "batches": 17,
        "bad_bytes": 3,
        "stopped_early": False,
        "binary_files_skipped": [],
        "paths_skipped": {"corpus/logo_small.png": "binary"},
        "entries_not_found": [f"w{i}" for i in range(15)],
        "vocabulary": {"duplicates": 0, "blank_lines": 2},
        "fill": {"method": "mapped", "alpha": 1.0, "held_out": {"mapped_cosine": 0.812345}},
    },
    "corpus": [{"path": "wiki.txt", "bytes": 217689}],
}
# What str() of a dict, a list, None, a bool or an unrounded float shows.
REPRS = re.compile(r"None|True|False|[{}\[\]]|'\w+'|\d\.\d{4,}")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (33415, "33,415"),  # counts stay exact
        (0, "0"),
        (0.25246325500029343, "0.252"),
        (28.026, "28.0"),
        (2.0, "2.00"),
        (100.0, "100"),
        (999.96, "1,000"),  # rounds up into the next decade
        (12345.6, "12,300"),
        (-0.0123456, "-0.0123"),
        (float("nan"), "nan"),
    ],
)
def test_a_number_has_three_significant_digits_and_a_count_all_of_its(value, shown):
    assert number(value) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.25246, "0.252 s"), (28.026, "28.0 s"), (59.99, "1 min 0 s"), (252.4, "4 min 12 s"),
     (3599.6, "1 h 00 min"), (7500, "2 h 05 min")],
)  # fmt: skip
def test_a_duration_in_seconds_minutes_or_hours(seconds, shown):
    assert duration(seconds) == shown


def test_values_in_words_and_units():
    assert value_text("batch_tokens", None) == "not set"
    assert value_text("center", False) == "no" and value_text("center", True) == "yes"
    assert value_text("encoder_wait_seconds", 0.25246325500029343) == "0.252 s"
    assert value_text("bytes", 217689) == "217.7 kB"
    assert value_text("bad_bytes", 3) == "3"  # a count of bytes, not a size
    assert value_text("vocabulary", {"duplicates": 0, "blank_lines": 2}) == (
        "duplicates 0, blank lines 2"
    )
    assert value_text("paths_skipped", {"corpus/logo_small.png": "binary"}) == (
        "corpus/logo_small.png binary"  # a path keeps its underscores
    )
    assert value_text("fill", META["stats"]["fill"]) == (
        "method mapped, alpha 1.00, held out (mapped cosine 0.812)"
    )
    assert value_text("entries_not_found", []) == "none" and value_text("fill", {}) == "none"
    assert value_text("entries_not_found", META["stats"]["entries_not_found"]) == (
        "w0, w1, w2, w3, w4, w5, w6, w7, w8, w9 and 5 more"
    )
    assert label("encoder_wait_seconds") == "encoder wait" and label("seconds") == "time"
    assert rows({"layers_used": [0, 1]}, none="-") == [("layers used", "0, 1")]


def test_info_prints_words_and_units_not_python_reprs(tmp_path):
    folder = tmp_path / "vectors"
    StaticVectors(["cat", "dog"], np.eye(2, dtype=np.float32), np.array([3, 1]), META).save(folder)
    result = CliRunner().invoke(app, ["info", str(folder)])
    assert result.exit_code == 0, result.output
    shown = result.output.splitlines()
    for line in (
        "  batch tokens: not set (default)",
        "  max contexts: 2,000",
        "  revision: not recorded",
        "  encoder wait: 0.252 s",
        "  time: 28.0 s",
        "  vocabulary: duplicates 0, blank lines 2",
        "  stopped early: no",
        "  binary files skipped: none",
        "  entries not found: w0, w1, w2, w3, w4, w5, w6, w7, w8, w9 and 5 more",
        "corpus: wiki.txt (217.7 kB)",
        "encoder: 17 batches, 1,966 tokens each; waited for input 0.252 s of the run's 28.0 s (1%)",
    ):
        assert line in shown, line
    assert [line for line in shown[1:] if REPRS.search(line)] == []


def test_info_names_the_first_corpus_files_and_counts_the_rest(tmp_path):
    folder = tmp_path / "vectors"
    corpus = [{"path": f"docs/{number:05}.txt", "bytes": 1_000} for number in range(3_000)]
    meta = {**META, "corpus": corpus}
    StaticVectors(["cat"], np.eye(1, dtype=np.float32), np.array([3]), meta).save(folder)
    shown = CliRunner().invoke(app, ["info", str(folder)]).output.splitlines()
    listed = [line for line in shown if line.startswith("corpus: ")]
    assert listed[0] == "corpus: docs/00000.txt (1.0 kB)" and len(listed) == 11
    assert listed[-1] == "corpus: 2,990 more files (3.0 MB; info --json lists them)"
