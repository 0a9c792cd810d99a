"""benchmarks/bf16_cpu.py: its variants, and a tiny side-by-side run through the command line."""

import argparse
import sys
from pathlib import Path

import pytest
from conftest import CORPUS_LINES, VOCAB_ENTRIES

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import bf16_cpu  # noqa: E402
from child_run import run_measured  # noqa: E402


def test_a_child_run_gives_its_exit_code_output_and_peak():
    script = "import sys; data = b'x' * (200 * 2**20); print('made'); sys.exit(3)"
    finished = run_measured([sys.executable, "-c", script])
    assert (finished.exit_code, finished.output) == (3, "made\n")
    assert finished.peak_bytes > 200 * 2**20 and finished.wall > 0 and finished.cpu > 0


def test_a_variant_is_pieces_joined_by_plus_and_float32_comes_first():
    first, second, third = bf16_cpu.parse_variants("bfloat16+freeze, int8+threads1+budget2048")
    assert first.name == "float32" and first.options == ("--dtype", "float32")
    assert second.options == ("--dtype", "bfloat16") and second.patches == ("freeze",)
    assert third.options == ("--dtype", "float32", "--quantize", "int8", "--batch-tokens", "2048")
    assert third.env == (("OMP_NUM_THREADS", "1"),)
    cached = bf16_cpu.parse_variant("auto+onednn1024+mmap128k").env
    assert dict(cached) == {
        "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024",
        "LRU_CACHE_CAPACITY": "1024",
        "MALLOC_MMAP_THRESHOLD_": "131072",
    }
    with pytest.raises(argparse.ArgumentTypeError, match="unknown variant piece 'int4'"):
        bf16_cpu.parse_variant("int4")


def test_auto_is_measured_against_float32_and_found_identical_here(roberta_dir, tmp_path, capsys):
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS_LINES) + "\n")
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB_ENTRIES) + "\n")
    variants = bf16_cpu.parse_variants("auto")
    results = bf16_cpu.measure(str(roberta_dir), variants, 1, tmp_path)
    assert [runs.failed for runs in results] == [None, None]
    float32, auto = results
    assert float32.dtype == "float32" and auto.cosine[1] > 0.999999
    assert all(0.1 < runs.peak[0] < 64 for runs in results)  # GB: torch alone takes more than 0.1
    bf16_cpu.auto_targets(results)
    printed = capsys.readouterr().out
    assert "round 1 auto:" in printed
    if auto.dtype == "float32":  # a CPU without bfloat16 units, as CI's
        assert auto.identical and "Vectors identical: yes" in printed
