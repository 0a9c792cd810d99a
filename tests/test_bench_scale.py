"""The scale benchmark (scale.py): its corpora, its targets' arithmetic, and one small run end to end
(the size CI can afford; the full set takes hours)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import scale  # noqa: E402

LINES = [f"Paragraph {number} tells of the war and the river bank." for number in range(40)]


@pytest.fixture(autouse=True)
def short_text(monkeypatch):
    """A few lines in place of gensim's paragraphs, which take a while to parse."""
    monkeypatch.setattr(scale, "text_lines", lambda: LINES)


def test_a_folder_and_one_file_of_the_same_count_hold_the_same_bytes(tmp_path):
    folder = scale.build_corpus(tmp_path, "files:25")
    alone = scale.build_corpus(tmp_path, "onefile:25")
    files = sorted(path for path in folder.rglob("*.txt"))
    assert len(files) == 25
    assert all(path.read_text().count("\n") == scale.LINES_PER_FILE for path in files)
    assert b"".join(path.read_bytes() for path in files) == alone.read_bytes()


def test_a_big_file_reaches_its_size_and_its_bz2_holds_the_same_text(tmp_path):
    import bz2

    compressed = scale.build_corpus(tmp_path, "bz2:1")
    plain = tmp_path / "big-1.txt"
    assert plain.stat().st_size >= 1_000_000
    assert bz2.decompress(compressed.read_bytes()) == plain.read_bytes()


def test_an_open_vocabulary_file_is_the_big_file_with_new_words_on_every_line(tmp_path):
    plain = scale.build_corpus(tmp_path, "big:1").read_text(encoding="utf-8").splitlines()
    lines = scale.build_corpus(tmp_path, "open:1").read_text(encoding="utf-8").splitlines()
    pairs = list(zip(lines, plain, strict=False))  # the new words take room: fewer lines
    assert len(pairs) > 1_000 and all(line.startswith(old) for line, old in pairs)
    new = [line.removeprefix(old).split() for line, old in pairs]
    assert all(len(words) == len(scale.NEW_WORD_KINDS) for words in new)
    assert len({word for words in new for word in words}) == len(new) * len(scale.NEW_WORD_KINDS)


def test_an_unknown_corpus_kind_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="unknown corpus 'pile:3'"):
        scale.build_corpus(tmp_path, "pile:3")


def test_the_vocabulary_holds_words_first_then_phrases(tmp_path):
    entries = scale.build_vocabulary(tmp_path, 12).read_text().splitlines()
    assert len(entries) == len(set(entries)) == 12
    assert " " not in entries[0] and " " in entries[-1]


def test_the_targets_compare_each_folder_with_its_one_file_and_workers_with_one_process():
    def result(rate, pss):
        return {"rate": rate, "peak_pss": pss}

    results = [
        {"corpus": "files:2000", "entries": 9, "engine": "serial", **result(100.0, 1e9)},
        {"corpus": "files:2000", "entries": 9, "engine": "workers", **result(90.0, 1.5e9)},
        {"corpus": "onefile:2000", "entries": 9, "engine": "serial", **result(125.0, 1e9)},
        {"corpus": "files:10", "entries": 9, "engine": "serial", **result(1.0, 0.5e9)},
        {"corpus": "files:20", "entries": 9, "engine": "serial", "failed": "boom"},
    ]
    lines = scale.targets(results)
    assert "files:2000 x 9 entries, serial: 1.00 GB peak (PSS; target < 2), rate 0.80x" in lines[0]
    assert any("serial: peak memory 2.00x from 10 to 2,000 files" in line for line in lines)
    assert lines[-1].startswith("files:2000 x 9: --workers 2 at 0.90x one process's rate")


def test_a_small_run_prints_a_row_per_engine_with_memory_and_the_checkpoint(tmp_path):
    scale.build_corpus(tmp_path, "files:40")  # the child finds them built
    scale.build_vocabulary(tmp_path, 12)
    done = subprocess.run(
        [sys.executable, "scale.py", "--work", str(tmp_path), "--runs", "files:40@12",
         "--engines", "serial,workers", "--checkpoint-every", "0.01"],
        cwd=BENCHMARKS, capture_output=True, text=True, timeout=600,
        env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("files:40 ")]
    assert [row[2] for row in rows] == ["serial", "workers"] * 2  # each row, then the table
    for row in rows:
        tokens_per_second, pss_gb = float(row[4].replace(",", "")), float(row[5])
        assert tokens_per_second > 0 and 0.05 < pss_gb < 8
        assert "MB (state" in " ".join(row)
