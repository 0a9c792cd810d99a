"""Checkpoint and resume: an interrupted run, resumed, gives the vectors of one not stopped."""

from __future__ import annotations

import errno
import json
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import CORPUS_LINES, PausedRun
from typer.testing import CliRunner

from roberta_static import DistillConfig, StaticVectors, distill
from roberta_static.api import distill_from_model
from roberta_static.cli import app
from roberta_static.engine.checkpoint import Saver, load_checkpoint, save_checkpoint
from roberta_static.errors import ConfigError, Interrupted, OutputError, VectorsError
from roberta_static.model.loading import load_pretrained
from roberta_static.stopping import Checkpointing, StopNow
from roberta_static.text.corpus import Corpus
from roberta_static.text.vocab import Vocabulary


@pytest.fixture()
def long_corpus(tmp_path) -> Path:
    path = tmp_path / "long.txt"
    path.write_text("\n".join(CORPUS_LINES * 150) + "\n")
    return path


def checkpoint_first_chunk(corpus, vocab, config, out: Path) -> None:
    """Run until the first batch is done, then stop with a checkpoint in ``out``."""
    stop = threading.Event()
    stop.set()
    with pytest.raises(Interrupted, match="resume with: roberta-static distill --resume"):
        distill(corpus, vocab, config, checkpointing=Checkpointing(out, 0, stop))


def test_a_stop_asked_before_any_sum_does_not_wait_for_batches_to_fill(
    roberta_dir, long_corpus, vocab_file, tmp_path
):
    # With this budget the whole corpus fits in what may wait for fuller batches: the stop must
    # send what waits at once, or it would take effect only once the corpus is read.
    config = DistillConfig(
        model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=8,
        batch_tokens=100_000,
    )  # fmt: skip
    checkpoint_first_chunk(long_corpus, vocab_file, config, tmp_path / "out")
    saved = load_checkpoint(tmp_path / "out")
    assert not all(shard.done for shard in saved.state.shards)


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


def test_stopped_run_resumes_to_identical_vectors_and_counts(
    roberta_dir, messy_corpus, vocab_file, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1-2", max_contexts=0, chunk_sentences=8)
    whole = distill(messy_corpus, vocab_file, config)
    out = tmp_path / "out"
    checkpoint_first_chunk(messy_corpus, vocab_file, config, out)
    saved = load_checkpoint(out)
    (shard,) = saved.state.shards  # one process: the corpus is one shard
    assert shard.position.file == 1 and shard.position.offset > 0
    # Counted up to the checkpoint's position, not up to what segmentation had read ahead.
    assert 0 < shard.stats.text_units == shard.position.line
    assert 0 < shard.stats.bad_bytes < whole.meta["stats"]["bad_bytes"]
    resumed = distill(messy_corpus, vocab_file, config, resume_from=saved)
    assert resumed.words == whole.words
    np.testing.assert_array_equal(resumed.vectors, whole.vectors)
    np.testing.assert_array_equal(resumed.counts, whole.counts)
    stats = whole.meta["stats"]
    assert stats["bad_bytes"] == 90 and stats["binary_files_skipped"] == [
        str(messy_corpus / "a.dat")
    ]
    # Not the time it took, nor how inputs were batched: the saved inputs wait again as if new,
    # so they may go in other batches than in the run that was not stopped.
    batching = ("seconds", "encoder_wait_seconds", "batches", "padded_tokens")
    for key, value in stats.items():
        if key not in batching:
            assert resumed.meta["stats"][key] == value, key


def test_reading_a_stopped_runs_folder_as_vectors_says_how_to_finish_it(
    roberta_dir, messy_corpus, vocab_file, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=8)
    out = tmp_path / "out"
    checkpoint_first_chunk(messy_corpus, vocab_file, config, out)
    expected = f"{out}: holds the checkpoint of a run not finished yet, no vectors; finish it "
    expected += f"with roberta-static distill --resume {out}"
    with pytest.raises(VectorsError, match=f"^{re.escape(expected)}$"):
        StaticVectors.load(out)


def cli(*args):
    return ["roberta-static", "distill", *map(str, args), "-q"]


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
    run = PausedRun(
        cli(long_corpus, *options, "--out", out, "--checkpoint-every", "0.05"),
        "roberta_static.engine.checkpoint:save_checkpoint",  # signalled once the first checkpoint is saved
        tmp_path / "pause",
    )
    stderr = run.signal(getattr(signal, how))
    process = run.process
    if how in ("SIGINT", "SIGTERM"):
        assert process.returncode == 130, stderr
        assert stderr.startswith("stopping... (Ctrl-C again to quit now)")
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
    # Only what the user typed and what changes the result is compared: not --chunk-sentences.
    assert changed.stderr.strip().endswith("cannot resume: layers was [1, 2], now [1]")
    other_vocab = tmp_path / "other.txt"
    other_vocab.write_text("another\nlist\n")
    refused = subprocess.run(
        ["roberta-static", "distill", "--resume", str(out), "--vocab", str(other_vocab)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.stderr.strip().endswith(
        f"cannot resume: the vocabulary {other_vocab} differs from the checkpoint's"
    )
    long_corpus.write_text("An edited first line.\n" + long_corpus.read_text())
    edited = subprocess.run(
        ["roberta-static", "distill", "--resume", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert edited.returncode == 1
    assert "long.txt changed since the checkpoint (in the part already read)" in edited.stderr
    fresh = subprocess.run(
        cli(long_corpus, "--vocab", vocab_file, "--model", roberta_dir, "--out", out),
        capture_output=True,
        text=True,
        check=False,
    )
    assert fresh.returncode == 1 and "holds the checkpoint of an unfinished run" in fresh.stderr
    long_corpus.rename(tmp_path / "moved.txt")
    gone = subprocess.run(
        ["roberta-static", "distill", "--resume", str(out)], capture_output=True, text=True
    )
    assert gone.returncode == 1 and gone.stderr.count("\n") == 1, gone.stderr
    assert gone.stderr.startswith(
        f"error: {out}: cannot resume: a corpus file of the checkpoint is gone ({long_corpus}: no "
        f"such file or folder); if the corpus moved, name it: roberta-static distill CORPUS... "
        f"--resume {out}"
    ), gone.stderr


def test_failed_checkpoint_write_keeps_the_previous_one(
    roberta_dir, long_corpus, vocab_file, tmp_path, monkeypatch
):
    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=8)
    out = tmp_path / "out"
    checkpoint_first_chunk(long_corpus, vocab_file, config, out)
    first = load_checkpoint(out)
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
    assert load_checkpoint(out).state.shards[0].position == first.state.shards[0].position
    assert sorted(p.name for p in out.iterdir()) == [".checkpoint"]


def test_a_stop_comes_after_the_batch_in_hand_and_resumes_identical(
    roberta_dir, long_corpus, vocab_file, tmp_path
):
    # One chunk of many small batches: the stop must not wait for the chunk to end.
    config = DistillConfig(
        model=str(roberta_dir), layers="1-2", max_contexts=0, batch_tokens=64, max_length=64
    )
    whole = distill(long_corpus, vocab_file, config)
    out = tmp_path / "out"
    checkpoint_first_chunk(long_corpus, vocab_file, config, out)
    saved = load_checkpoint(out)
    assert saved.state.shards[0].leftover and saved.state.stats.tokens <= 64
    resumed = distill(long_corpus, vocab_file, config, resume_from=saved)
    np.testing.assert_array_equal(resumed.vectors, whole.vectors)
    np.testing.assert_array_equal(resumed.counts, whole.counts)
    for key, value in whole.meta["stats"].items():
        if key not in ("seconds", "encoder_wait_seconds"):  # the time it took, not what it did
            assert resumed.meta["stats"][key] == value, key


def test_a_stop_while_counting_the_vocabulary_ends_the_run_and_saves_nothing(
    roberta_dir, long_corpus, tmp_path
):
    out = tmp_path / "out"
    config = DistillConfig(model=str(roberta_dir), layers="1", min_count=1)
    stop = threading.Event()
    stop.set()
    read = []
    with pytest.raises(Interrupted, match="stopped while counting the vocabulary"):
        distill(
            long_corpus,
            None,
            config,
            progress=lambda report: read.append(getattr(report, "bytes_read", 0)),
            checkpointing=Checkpointing(out, 0, stop),
        )
    assert not out.exists() and max(read, default=0) < long_corpus.stat().st_size


def _stop_in_forward(model, checkpointing: Checkpointing, at_call: int) -> None:
    """Call ``request_stop`` inside the model's forward, as a signal arriving there would.

    Past the first call, it comes once the pass has taken the batches summed before: the encoder
    thread may run ahead of the pass's loop (on a loaded machine), and a stop before the loop
    has taken a summed batch ends the run with nothing saved, as it should.
    """
    calls = []

    def hook(module, args):
        calls.append(1)
        if len(calls) == at_call:
            deadline = time.monotonic() + 30
            while at_call > 1 and checkpointing.nothing_to_lose and time.monotonic() < deadline:
                time.sleep(0.01)
            checkpointing.request_stop()

    model.register_forward_pre_hook(hook)


@pytest.fixture()
def short_corpus(tmp_path) -> Path:
    path = tmp_path / "short.txt"
    path.write_text("\n".join(CORPUS_LINES * 10) + "\n")
    return path


def test_a_stop_in_the_encoder_drops_the_batch_in_hand_and_resumes_identical(
    roberta_dir, short_corpus, vocab_file, tmp_path
):
    config = DistillConfig(
        model=str(roberta_dir), layers="1-2", max_contexts=0, batch_tokens=64, max_length=64
    )
    model, tokenizer = load_pretrained(config)
    whole = distill_from_model(model, tokenizer, Corpus([short_corpus]), _vocab(vocab_file), config)
    out = tmp_path / "out"
    checkpointing = Checkpointing(out, 0)
    _stop_in_forward(model, checkpointing, at_call=3)
    with pytest.raises(Interrupted, match="resume with"):
        distill_from_model(
            model, tokenizer, Corpus([short_corpus]), _vocab(vocab_file), config,
            checkpointing=checkpointing,
        )  # fmt: skip
    saved = load_checkpoint(out)
    # Two batches were added; the third, cut short, waits in the checkpoint with the rest.
    assert 0 < saved.state.stats.tokens <= 2 * 64 and saved.state.shards[0].leftover
    resumed = distill(short_corpus, vocab_file, config, resume_from=saved)
    np.testing.assert_array_equal(resumed.vectors, whole.vectors)
    np.testing.assert_array_equal(resumed.counts, whole.counts)


@pytest.mark.parametrize("resumed", [False, True])
def test_a_stop_before_any_batch_is_added_saves_nothing(
    resumed, roberta_dir, short_corpus, vocab_file, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1-2", batch_tokens=64, max_length=64)
    out = tmp_path / "out"
    saved = None
    if resumed:
        checkpoint_first_chunk(short_corpus, vocab_file, config, out)
        saved = load_checkpoint(out)
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    model, tokenizer = load_pretrained(config)
    checkpointing = Checkpointing(out, 0)
    _stop_in_forward(model, checkpointing, at_call=1)
    with pytest.raises(StopNow):
        distill_from_model(
            model, tokenizer, Corpus([short_corpus]), _vocab(vocab_file), config,
            checkpointing=checkpointing, resume_from=saved,
        )  # fmt: skip
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before


def test_a_stop_while_loading_or_counting_is_at_once(roberta_dir, long_corpus, tmp_path):
    config = DistillConfig(model=str(roberta_dir), layers="1", min_count=1)
    checkpointing = Checkpointing(tmp_path / "out", 0)
    read = []

    def progress(report):
        read.append(getattr(report, "bytes_read", 0))
        checkpointing.request_stop()

    with pytest.raises(StopNow):
        distill(long_corpus, None, config, progress=progress, checkpointing=checkpointing)
    assert len(read) == 1 and not (tmp_path / "out").exists()


def _vocab(path: Path) -> Vocabulary:
    return Vocabulary.from_file(path, "lower")


def test_resume_from_another_folder_with_the_corpus_given_relatively(
    roberta_dir, long_corpus, vocab_file, tmp_path, monkeypatch
):
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=8)
    reference = distill(long_corpus, vocab_file, config)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(long_corpus.parent)
    # Resume with the saved paths, or with the same file named by its absolute path.
    for name, corpus_args in (("saved", []), ("absolute", [long_corpus])):
        out = tmp_path / name
        checkpoint_first_chunk(Path(long_corpus.name), vocab_file, config, out)
        done = subprocess.run(
            ["roberta-static", "distill", *map(str, corpus_args), "--resume", str(out), "-q"],
            cwd=elsewhere,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        np.testing.assert_array_equal(np.load(out / "vectors.npy"), reference.vectors)


def test_a_moved_corpus_resumes_when_named_with_a_note(
    roberta_dir, long_corpus, vocab_file, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=8)
    reference = distill(long_corpus, vocab_file, config)
    out = tmp_path / "out"
    checkpoint_first_chunk(long_corpus, vocab_file, config, out)
    moved = long_corpus.rename(tmp_path / "moved.txt")
    done = subprocess.run(
        ["roberta-static", "distill", str(moved), "--resume", str(out), "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(
        f"note: resuming over renamed corpus files: {moved} (was {long_corpus.resolve()})"
    ), done.stderr
    np.testing.assert_array_equal(np.load(out / "vectors.npy"), reference.vectors)


def test_runtime_options_may_change_on_resume(roberta_dir, long_corpus, vocab_file, tmp_path):
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=8)
    whole = distill(long_corpus, vocab_file, config)
    out = tmp_path / "out"
    checkpoint_first_chunk(long_corpus, vocab_file, config, out)
    runtime = ["--batch-tokens", "256", "--chunk-sentences", "3", "--device", "cpu"]
    done = subprocess.run(
        ["roberta-static", "distill", "--resume", str(out), *runtime, "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Other batches sum in another order: equal up to float rounding.
    np.testing.assert_allclose(np.load(out / "vectors.npy"), whole.vectors, rtol=1e-5, atol=1e-6)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"]["chunk_sentences"] == 3 and meta["config"]["batch_tokens"] == 256


def test_bad_input_mid_run_keeps_the_checkpoint_and_resumes_once_fixed(
    roberta_dir, vocab_file, tmp_path
):
    corpus = tmp_path / "docs.jsonl"
    records = [json.dumps({"text": line}) for line in CORPUS_LINES * 60]
    bad = len(records) - 20
    corpus.write_text("\n".join(records[:bad] + ["{broken"] + records[bad:]) + "\n")
    options = ["--vocab", vocab_file, "--model", roberta_dir, "-l", "1", "--max-contexts", "0"]
    # Small batches, so that some are summed (and saved) before the bad line: with the default
    # budget the inputs before it would all still wait for their batches to fill.
    options += ["--chunk-sentences", "8", "--batch-tokens", "128"]
    out = tmp_path / "out"
    failed = subprocess.run(
        cli(corpus, *options, "--out", out, "--checkpoint-every", "0.0001"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert failed.returncode == 1
    (line,) = failed.stderr.strip().splitlines()
    assert line.startswith(f"error: {corpus}:{bad + 1}: not valid JSON")
    assert line.endswith(
        f"; the work before it is kept in {out / '.checkpoint'}: fix the input, then resume "
        f"with: roberta-static distill --resume {out}"
    )
    assert sorted(p.name for p in out.iterdir()) == [".checkpoint"]
    corpus.write_text("\n".join(records) + "\n")  # the bad line removed
    subprocess.run(["roberta-static", "distill", "--resume", str(out), "-q"], check=True)
    reference = tmp_path / "reference"
    subprocess.run(cli(corpus, *options, "--out", reference), check=True)
    np.testing.assert_allclose(
        np.load(out / "vectors.npy"), np.load(reference / "vectors.npy"), rtol=1e-5, atol=1e-6
    )
    assert (out / "vocab.tsv").read_text() == (reference / "vocab.tsv").read_text()


def test_resume_names_a_finished_run_and_an_old_checkpoint(
    roberta_dir, long_corpus, vocab_file, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=8)
    out = tmp_path / "out"
    checkpoint_first_chunk(long_corpus, vocab_file, config, out)
    state = out / ".checkpoint" / "state.json"
    old = json.loads(state.read_text())
    del old["format"]
    state.write_text(json.dumps(old))
    with pytest.raises(ConfigError, match="written by an older roberta-static"):
        load_checkpoint(out)
    distill(long_corpus, vocab_file, config).save(finished := tmp_path / "finished")
    with pytest.raises(ConfigError, match="the run finished .*; nothing to resume"):
        load_checkpoint(finished)


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_at_the_first_checkpoint_leaves_no_output_folder(
    roberta_dir, long_corpus, vocab_file, tmp_path, monkeypatch
):
    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=8)
    monkeypatch.setattr(np, "save", no_space)
    stop = threading.Event()
    stop.set()
    out = tmp_path / "new" / "out"
    with pytest.raises(OutputError, match=r"\.checkpoint: writing failed \(No space left"):
        distill(long_corpus, vocab_file, config, checkpointing=Checkpointing(out, 0, stop))
    assert not (tmp_path / "new").exists()


def test_a_full_disk_at_a_later_checkpoint_says_to_free_space_then_resume(
    roberta_dir, long_corpus, vocab_file, tmp_path, monkeypatch
):
    saves = []

    def full_after_the_first(folder, checkpoint):
        saves.append(folder)
        with monkeypatch.context() as disk:
            if len(saves) > 1:
                disk.setattr(np, "save", no_space)
            return save_checkpoint(folder, checkpoint)

    monkeypatch.setattr("roberta_static.engine.checkpoint.save_checkpoint", full_after_the_first)
    out = tmp_path / "out"
    options = ["--vocab", vocab_file, "--model", roberta_dir, "-l", "1", "--chunk-sentences", "8"]
    result = CliRunner().invoke(
        app, cli(long_corpus, *options, "--out", out, "--checkpoint-every", "0.0001")[1:]
    )
    assert result.exit_code == 1 and len(saves) == 2
    assert result.output == (
        f"error: {out / '.checkpoint'}: writing failed (No space left on device); its previous "
        f"contents are unchanged; free space, then resume with: roberta-static distill --resume "
        f"{out}\n"
    )
    monkeypatch.undo()
    resumed = CliRunner().invoke(app, ["distill", "--resume", str(out), "-q"])
    assert resumed.exit_code == 0, resumed.output
    assert (out / "vectors.npy").exists() and not (out / ".checkpoint").exists()


def test_an_option_refused_on_resume_names_its_flag_and_asks_no_fix_of_the_input(
    roberta_dir, long_corpus, vocab_file, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=8)
    out = tmp_path / "out"
    checkpoint_first_chunk(long_corpus, vocab_file, config, out)
    result = CliRunner().invoke(app, ["distill", "--resume", str(out), "--device", "cuda:7", "-q"])
    assert result.exit_code == 1
    assert result.output.startswith("error: --device: cuda:7 is not available on this machine")
    assert "fix the input" not in result.output
    assert (out / ".checkpoint").exists()


@pytest.mark.parametrize("options", [{"workers": 2}, {"device": "cpu,cpu"}, {"engine": "ray"}])
def test_a_one_process_checkpoint_resumes_with_workers_devices_or_ray(
    options, roberta_dir, long_corpus, vocab_file, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=8, max_contexts=0)
    whole = distill(long_corpus, vocab_file, config)
    out = tmp_path / "out"
    checkpoint_first_chunk(long_corpus, vocab_file, config, out)
    saved = load_checkpoint(out)
    assert len(saved.state.shards) == 1 and not saved.state.shards[0].done
    resumed = distill(long_corpus, vocab_file, config.replace(**options), resume_from=saved)
    assert resumed.words == whole.words
    np.testing.assert_allclose(resumed.vectors, whole.vectors, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(resumed.counts, whole.counts)
    for key in ("sentences", "text_units", "tokens", "sentences_encoded", "occurrences_used"):
        assert resumed.meta["stats"][key] == whole.meta["stats"][key], key


def test_distill_refuses_to_resume_with_a_changed_option_or_corpus(
    roberta_dir, long_corpus, vocab_file, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=8)
    out = tmp_path / "out"
    checkpoint_first_chunk(long_corpus, vocab_file, config, out)
    saved = load_checkpoint(out)
    with pytest.raises(ConfigError, match=r"cannot resume: layers was \[1\], now \[1, 2\]"):
        distill(long_corpus, vocab_file, config.replace(layers="1-2"), resume_from=saved)
    with pytest.raises(ConfigError, match=r"cannot resume: the vocabulary differs"):
        distill(long_corpus, ["other", "words"], config, resume_from=saved)
    with long_corpus.open("r+b") as handle:  # a byte of the part already read changes
        handle.write(b"X")
    with pytest.raises(ConfigError, match="changed since the checkpoint"):
        distill(long_corpus, vocab_file, config, resume_from=saved)


def test_one_process_saves_every_every_seconds_inside_one_long_chunk(
    roberta_dir, short_corpus, vocab_file, tmp_path, monkeypatch
):
    # One chunk of many batches, and an encoder slower than the checkpoints are frequent.
    config = DistillConfig(
        model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=100_000,
        batch_tokens=64, max_length=64,
    )  # fmt: skip
    model, tokenizer = load_pretrained(config)
    model.register_forward_pre_hook(lambda module, args: time.sleep(0.02))
    left_when_saved, save = [], Saver.save

    def recording(saver, state):
        left_when_saved.append(sum(len(shard.leftover) for shard in state.shards))
        save(saver, state)

    monkeypatch.setattr(Saver, "save", recording)
    checkpointing = Checkpointing(tmp_path / "out", every_seconds=0.05)
    distill_from_model(
        model, tokenizer, Corpus([short_corpus]), _vocab(vocab_file), config,
        checkpointing=checkpointing,
    )  # fmt: skip
    # Saved again and again as the chunk's batches were summed, its leftover shrinking.
    assert len(set(left_when_saved)) >= 3
    assert left_when_saved == sorted(left_when_saved, reverse=True)


def test_an_older_checkpoint_is_refused_in_one_line_and_overwrite_starts_again(
    roberta_dir, short_corpus, vocab_file, tmp_path
):
    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=8)
    out = tmp_path / "out"
    checkpoint_first_chunk(short_corpus, vocab_file, config, out)
    state = out / ".checkpoint" / "state.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "format": 2}))
    resumed = CliRunner().invoke(app, ["distill", "--resume", str(out), "-q"])
    assert resumed.exit_code == 1
    assert resumed.output == (
        f"error: {out / '.checkpoint'}: written by an older roberta-static (checkpoint format 2), "
        "which this one cannot resume; run the distill command again with --overwrite instead of "
        "--resume\n"
    )
    again = CliRunner().invoke(
        app,
        ["distill", str(short_corpus), "--vocab", str(vocab_file), "--model", str(roberta_dir),
         "-l", "1", "--out", str(out), "--overwrite", "-q"],
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    assert (out / "vectors.npy").exists() and not (out / ".checkpoint").exists()
