"""Checkpoint and resume: an interrupted run, resumed, gives bit-identical vectors on CPU."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import CORPUS_LINES

from roberta_static import DistillConfig, distill
from roberta_static.checkpoint import Checkpointing, load_checkpoint
from roberta_static.errors import Interrupted, OutputError


@pytest.fixture()
def long_corpus(tmp_path) -> Path:
    path = tmp_path / "long.txt"
    path.write_text("\n".join(CORPUS_LINES * 150) + "\n")
    return path


def checkpoint_first_chunk(corpus, vocab, config, out: Path) -> None:
    """Run until the first chunk is done, then stop with a checkpoint in ``out``."""
    stop = threading.Event()
    stop.set()
    with pytest.raises(Interrupted, match="resume with: roberta-static distill --resume"):
        distill(corpus, vocab, config, checkpointing=Checkpointing(out, 0, stop))


@pytest.fixture()
def messy_corpus(tmp_path) -> Path:
    """A folder: a binary file first, then text with an invalid byte on every tenth line."""
    folder = tmp_path / "messy"
    folder.mkdir()
    (folder / "a.dat").write_bytes(b"\0\1\2 binary")
    lines = [line.encode() for line in CORPUS_LINES * 150]
    lines[::10] = [line + b" caf\xe9" for line in lines[::10]]
    (folder / "b.txt").write_bytes(b"\n".join(lines) + b"\n")
    return folder


def test_stopped_run_resumes_to_identical_vectors_and_stats(
    roberta_dir, messy_corpus, vocab_file, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1-2", max_contexts=0, chunk_sentences=8)
    whole = distill(messy_corpus, vocab_file, config)
    out = tmp_path / "out"
    checkpoint_first_chunk(messy_corpus, vocab_file, config, out)
    saved = load_checkpoint(out)
    assert saved.position.file == 1 and saved.position.offset > 0
    # Counted up to the checkpoint's position, not up to what segmentation had read ahead.
    assert 0 < saved.stats["text_units"] == saved.position.line
    assert 0 < saved.stats["bad_bytes"] < whole.meta["stats"]["bad_bytes"]
    resumed = distill(messy_corpus, vocab_file, config, resume_from=saved)
    assert resumed.words == whole.words
    np.testing.assert_array_equal(resumed.vectors, whole.vectors)
    np.testing.assert_array_equal(resumed.counts, whole.counts)
    stats = whole.meta["stats"]
    assert stats["bad_bytes"] == 90 and stats["binary_files_skipped"] == [
        str(messy_corpus / "a.dat")
    ]
    for key, value in stats.items():
        if key != "seconds":
            assert resumed.meta["stats"][key] == value, key


def cli(*args):
    return ["roberta-static", "distill", *map(str, args), "-q"]


def wait_for_checkpoint(process, folder: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not (folder / ".checkpoint" / "state.json").exists():
        assert process.poll() is None, "the run ended before its first checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT", "SIGTERM"])
def test_killed_cli_run_resumes_bit_identical(how, roberta_dir, long_corpus, vocab_file, tmp_path):
    options = [
        "--vocab",
        vocab_file,
        "--model",
        roberta_dir,
        "-l",
        "1-2",
        "--max-contexts",
        "0",
        "--chunk-sentences",
        "8",
    ]
    reference = tmp_path / "reference"
    subprocess.run(cli(long_corpus, *options, "--out", reference), check=True)
    out = tmp_path / "out"
    process = subprocess.Popen(
        cli(long_corpus, *options, "--out", out, "--checkpoint-every", "0.05"),
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_checkpoint(process, out)
    os.kill(process.pid, getattr(signal, how))
    _, stderr = process.communicate(timeout=120)
    if how in ("SIGINT", "SIGTERM"):
        assert process.returncode == 130
        assert f"resume with: roberta-static distill --resume {out}" in stderr
    else:
        assert process.returncode == -signal.SIGKILL
    assert not (out / "vectors.npy").exists()
    subprocess.run(["roberta-static", "distill", "--resume", str(out), "-q"], check=True)
    assert not (out / ".checkpoint").exists()
    np.testing.assert_array_equal(np.load(out / "vectors.npy"), np.load(reference / "vectors.npy"))
    assert (out / "vocab.tsv").read_text() == (reference / "vocab.tsv").read_text()


def test_resume_refuses_a_changed_config_or_corpus(roberta_dir, long_corpus, vocab_file, tmp_path):
    config = DistillConfig(model=str(roberta_dir), layers="1-2", chunk_sentences=8)
    out = tmp_path / "out"
    checkpoint_first_chunk(long_corpus, vocab_file, config, out)
    changed = subprocess.run(
        cli(
            long_corpus,
            "--vocab",
            vocab_file,
            "--model",
            roberta_dir,
            "-l",
            "1",
            "--chunk-sentences",
            "8",
            "--resume",
            out,
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    assert changed.returncode == 1
    assert "cannot resume: layers was [1, 2], now [1]" in changed.stderr
    with open(long_corpus, "a") as handle:
        handle.write("one more line\n")
    edited = subprocess.run(
        ["roberta-static", "distill", "--resume", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert edited.returncode == 1 and "long.txt changed since the checkpoint" in edited.stderr
    fresh = subprocess.run(
        cli(long_corpus, "--vocab", vocab_file, "--model", roberta_dir, "--out", out),
        capture_output=True,
        text=True,
        check=False,
    )
    assert fresh.returncode == 1 and "holds the checkpoint of an unfinished run" in fresh.stderr


def test_failed_checkpoint_write_keeps_the_previous_one(
    roberta_dir, long_corpus, vocab_file, tmp_path, monkeypatch
):
    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=8)
    out = tmp_path / "out"
    checkpoint_first_chunk(long_corpus, vocab_file, config, out)
    first = load_checkpoint(out)

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", no_space)
    stop = threading.Event()
    stop.set()
    with pytest.raises(OutputError, match=r"\.checkpoint: writing failed \(No space left"):
        distill(
            long_corpus,
            vocab_file,
            config,
            checkpointing=Checkpointing(out, 0, stop),
            resume_from=first,
        )
    monkeypatch.undo()
    assert load_checkpoint(out).position == first.position
    assert sorted(p.name for p in out.iterdir()) == [".checkpoint"]
