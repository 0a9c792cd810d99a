"""The command line end to end on examples/, and its one-line errors."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import CORPUS_LINES
from gensim.models import KeyedVectors
from test_atomic import snapshot, user_folder
from test_corpus import DAMAGED, write_damaged
from test_merge import distilled
from test_precision import AMX, fake_cpu
from typer.testing import CliRunner

from roberta_static import DistillConfig, distill
from roberta_static.atomic import output_lock
from roberta_static.cli import app
from roberta_static.errors import Interrupted
from roberta_static.formats.exports import export
from roberta_static.readable import duration
from roberta_static.stopping import Checkpointing
from roberta_static.text.vocab import Vocabulary
from roberta_static.vectors.static import StaticVectors
from roberta_static.vectors.target_files import write_targets
from roberta_static.vectors.targets import SentenceTargets

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_distill_examples_and_every_export(roberta_dir, tmp_path):
    out = tmp_path / "vectors"
    examples = ["distill", EXAMPLES / "wiki.txt", "--vocab", EXAMPLES / "vocab.txt",
                "--model", roberta_dir, "--out", out, "--quiet"]  # fmt: skip
    result = run(*examples, "--layers", "1-2", "--formats", "kv,word2vec,word2vec-bin")
    assert result.exit_code == 0, result.output
    vecs = StaticVectors.load(out)
    entries = (EXAMPLES / "vocab.txt").read_text().split("\n")
    assert len(vecs) == len([e for e in entries if e]) and "united states" in vecs
    assert vecs.meta["config"]["layers"] == [1, 2] and vecs.meta["model"]["sha256"]
    kv = KeyedVectors.load(str(out / "vectors.kv"))
    text = KeyedVectors.load_word2vec_format(str(out / "vectors.txt"))
    binary = KeyedVectors.load_word2vec_format(str(out / "vectors.bin"), binary=True)
    for loaded in (kv, text, binary):
        assert len(loaded) == len(vecs)
        assert len(loaded.most_similar("war", topn=3)) == 3
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "war\trevolution\t7.0\nchild\tchildren\t9.5\nsnow\tcongress\t0.5\nwar\tunknownword\t3\n"
    )
    pearson, spearman, oov = text.evaluate_word_pairs(str(pairs), delimiter="\t")
    assert oov == 25.0 and np.isfinite(spearman.statistic)

    similar = run("similar", out, "War", "-n", "3")
    assert similar.exit_code == 0 and len(similar.output.strip().splitlines()) == 3
    info = run("info", out)
    assert info.exit_code == 0 and "entries x 32 dimensions" in info.output
    stats = vecs.meta["stats"]
    waited = f"waited for input {duration(stats['encoder_wait_seconds'])} of the run's"
    assert f"encoder: {stats['batches']:,} batches, " in info.output and waited in info.output

    again = run(*examples)
    assert again.exit_code == 1 and "pass --overwrite" in again.output


def test_export_command(roberta_dir, tmp_path, corpus_file, vocab_file):
    out = tmp_path / "v"
    assert (
        run(
            "distill",
            corpus_file,
            "--vocab",
            vocab_file,
            "--model",
            roberta_dir,
            "--out",
            out,
            "-l",
            "1",
            "-q",
        ).exit_code
        == 0
    )
    result = run("export", out, "--formats", "word2vec")
    assert (
        result.exit_code == 0
        and (out / "vectors.txt").exists()
        and not (out / "vectors.kv").exists()
    )


def test_sentence_encoder_exports_from_distill_and_export(
    roberta_dir, tmp_path, corpus_file, vocab_file
):
    out = tmp_path / "v"
    formats = ["--formats", "model2vec,sentence-transformers", "--sif-coefficient", "0.001"]
    distilled = run("distill", corpus_file, "--vocab", vocab_file, "--model", roberta_dir,
                    "--out", out, "-l", "1", "-q", *formats)  # fmt: skip
    assert distilled.exit_code == 0, distilled.output
    config = json.loads((out / "model2vec" / "config.json").read_text())
    assert config["sif_coefficient"] == 0.001 and config["hidden_dim"] == 32
    assert (out / "sentence-transformers" / "model.safetensors").exists()
    exported = run("export", out, "--formats", "model2vec", "--overwrite")
    assert exported.exit_code == 0 and exported.output == f"wrote {out / 'model2vec'}\n"
    assert json.loads((out / "model2vec" / "config.json").read_text())["sif_coefficient"] is None


def bad_input_cases(tmp: Path, model: Path, corpus: Path, vocab: Path):
    empty = tmp / "empty.txt"
    empty.write_text("")
    blank_vocab = tmp / "blank_vocab.txt"
    blank_vocab.write_text("\n \n")
    not_model = tmp / "not_a_model"
    not_model.mkdir()
    (not_model / "readme.txt").write_text("hi")
    return {
        "missing corpus": (
            [tmp / "nope.txt", "--vocab", vocab, "--model", model],
            "nope.txt: no such file",
        ),
        "empty corpus": (
            [empty, "--vocab", vocab, "--model", model, "-l", "1"],
            "empty.txt: corpus holds no text",
        ),
        "empty vocabulary": (
            [corpus, "--vocab", blank_vocab, "--model", model, "-l", "1"],
            "vocabulary is empty",
        ),
        "layer out of range": (
            [corpus, "--vocab", vocab, "--model", model, "--layers", "7"],
            "layers: [7] out of range; this model has layers 0-2",
        ),
        "not a model": (
            [corpus, "--vocab", vocab, "--model", not_model],
            "not_a_model: cannot load a model",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing corpus",
        "empty corpus",
        "empty vocabulary",
        "layer out of range",
        "not a model",
    ],
)
def test_bad_input_gives_one_line_and_no_output(
    case, roberta_dir, corpus_file, vocab_file, tmp_path
):
    args, message = bad_input_cases(tmp_path, roberta_dir, corpus_file, vocab_file)[case]
    out = tmp_path / "out" / "vectors"
    result = run("distill", *args, "--out", out, "--quiet")
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0 and result.output.startswith("error: ")
    assert message in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", DAMAGED)
def test_damaged_compressed_corpus_is_one_line_and_leaves_no_output(
    case, roberta_dir, vocab_file, tmp_path
):
    path, message = write_damaged(tmp_path, case)
    out = tmp_path / "out"
    result = run("distill", path, "--vocab", vocab_file, "--model", roberta_dir, "-l", "1",
                 "--out", out, "--quiet")  # fmt: skip
    assert result.exit_code == 1
    assert result.output.startswith(f"error: {path}: {message}")
    assert result.output.count("\n") == 1 and "Aborted" not in result.output
    assert not out.exists()


WRITERS = ["distill", "postprocess", "sweep", "spacy-init", "merge", "tune"]


def with_targets(vectors: Path, sentences: int = 30) -> None:
    """Give a vectors folder made-up sentence targets (random teacher vectors), for tune."""
    rng = np.random.default_rng(1)
    words = StaticVectors.load(vectors).words
    lengths = rng.integers(1, 4, size=sentences)
    targets = SentenceTargets(100, 5)
    targets.add(
        np.arange(sentences, dtype=np.uint64),
        rng.normal(size=(sentences, 5)),
        np.cumsum([0, *lengths]),
        rng.integers(0, len(words), size=lengths.sum()),
        np.ones(lengths.sum(), dtype=np.int64),
    )
    write_targets(targets, vectors, words)


def writer_args(command, out, model, corpus, vocab, tmp):
    """Arguments of a command that writes the folder ``out``, inputs made under ``tmp``."""
    vectors = tmp / "vectors"
    if not vectors.exists():
        rng = np.random.default_rng(0)
        # Enough words for the spaCy component's weighted document vectors (4 components out).
        words = ["cat", "dog", "garden", "house", "tree", "river"]
        StaticVectors(words, rng.normal(size=(6, 8)), [3, 2, 1, 1, 1, 1]).save(vectors)
        with_targets(vectors)
        distilled(["cat", "dog"], rng.normal(size=(2, 4)), [3, 2]).save(tmp / "march")
        distilled(["cat", "garden"], rng.normal(size=(2, 4)), [1, 4]).save(tmp / "april")
    pairs = tmp / "pairs.tsv"
    pairs.write_text("cat\tdog\t8\ncat\tgarden\t2\ndog\tgarden\t3\n")
    inputs = [corpus, "--vocab", vocab, "--model", model, "-q"]
    return {
        "distill": ["distill", *inputs, "-l", "1", "--out", out],
        "postprocess": ["postprocess", vectors, out, "--center"],
        "sweep": ["sweep", *inputs, "--dataset", pairs, "--out", out],
        "spacy-init": ["spacy-init", vectors, out],
        "merge": ["merge", tmp / "march", tmp / "april", "--out", out],
        "tune": ["tune", vectors, "--out", out, "--max-epochs", "1", "-q"],
    }[command]


@pytest.mark.parametrize("command", WRITERS)
def test_overwrite_never_deletes_files_roberta_static_did_not_write(
    command, roberta_dir, corpus_file, vocab_file, tmp_path
):
    out = user_folder(tmp_path / "mine")
    args = writer_args(command, out, roberta_dir, corpus_file, vocab_file, tmp_path)
    before = snapshot(tmp_path)
    result = run(*args, "--overwrite")
    assert result.exit_code == 1
    assert result.output == (
        f"error: {out}: holds notes.txt, sub/, which roberta-static did not write; choose a new "
        "or empty output folder (--overwrite replaces only roberta-static's own outputs)\n"
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", WRITERS)
def test_overwrite_replaces_an_output_of_the_same_command(
    command, roberta_dir, corpus_file, vocab_file, tmp_path
):
    out = tmp_path / "out"
    args = writer_args(command, out, roberta_dir, corpus_file, vocab_file, tmp_path)
    assert run(*args).exit_code == 0
    written = sorted(p.name for p in out.iterdir())
    again = run(*args)
    assert again.exit_code == 1 and "pass --overwrite" in again.output
    (out / "notes.txt").write_text("mine")
    assert run(*args, "--overwrite").exit_code == 1 and (out / "notes.txt").exists()
    (out / "notes.txt").unlink()
    inode = out.stat().st_ino
    replaced = run(*args, "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert out.stat().st_ino != inode and sorted(p.name for p in out.iterdir()) == written
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_checkpoint_folder_holding_user_files_is_refused_before_the_run(
    roberta_dir, corpus_file, vocab_file, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    stop = threading.Event()
    stop.set()
    config = DistillConfig(model=str(roberta_dir), layers="1", chunk_sentences=1)
    with pytest.raises(Interrupted):
        distill(corpus_file, vocab_file, config, checkpointing=Checkpointing(out, 0, stop))
    (out / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)

    def never(*args, **kwargs):
        raise AssertionError("the run started")

    monkeypatch.setattr("roberta_static.api.distill", never)
    fresh = [corpus_file, "--vocab", vocab_file, "--model", roberta_dir, "--out", out]
    for args in (["--resume", out], [*fresh, "--overwrite"], fresh):
        result = run("distill", *args, "-q")
        assert result.exit_code == 1
        assert result.output.startswith(
            f"error: {out}: holds notes.txt, which roberta-static did not write;"
        )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", WRITERS)
def test_the_current_folder_is_refused_and_nothing_is_left(
    command, roberta_dir, corpus_file, vocab_file, tmp_path, monkeypatch
):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = writer_args(command, Path("."), roberta_dir, corpus_file, vocab_file, tmp_path)
    before = snapshot(tmp_path)
    result = run(*args, "--overwrite")
    assert result.exit_code == 1
    assert result.output == (
        "error: .: is the current folder or holds it, and cannot be replaced; "
        "choose an output folder inside it\n"
    )
    assert snapshot(tmp_path) == before


def test_full_disk_is_one_line_and_leaves_no_output(
    roberta_dir, corpus_file, vocab_file, tmp_path, monkeypatch
):
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", no_space)
    out = tmp_path / "out"
    result = run(
        "distill", corpus_file, "--vocab", vocab_file, "--model", roberta_dir, "-l", "1",
        "--out", out, "--quiet",
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.output == (
        f"error: {out}: writing failed (No space left on device); nothing was left behind\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "vocab.txt"]


def test_unwritable_output_folder_is_one_line(
    roberta_dir, corpus_file, vocab_file, tmp_path, monkeypatch
):
    # Root ignores permission bits, so the refusal is raised where the folder is made.
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("tempfile.mkdtemp", refuse)
    out = tmp_path / "locked" / "out"
    result = run(
        "distill", corpus_file, "--vocab", vocab_file, "--model", roberta_dir, "-l", "1",
        "--out", out, "--quiet",
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.output == f"error: {out}: cannot create output folder (Permission denied)\n"
    assert not (tmp_path / "locked").exists()


def test_skipped_and_repaired_input_is_warned_even_when_quiet(roberta_dir, vocab_file, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (corpus / "text.txt").write_bytes(b"The cat sat on the mat in Paris, caf\xe9.\n")
    (corpus / "wide.txt").write_text("The dog runs. " + "x" * 250_000 + "\n")  # one line cut
    out = tmp_path / "out"
    result = run("distill", corpus, "--vocab", vocab_file, "--model", roberta_dir, "-l", "1",
                 "--out", out, "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "warning: 1 invalid UTF-8 bytes replaced",
        "warning: 1 lines longer than 100 kB read as several units each (cut at a space where "
        "there is one)",
        f"warning: 1 binary files (NUL bytes) skipped: {corpus / 'image.png'}",
    ]
    stats = StaticVectors.load(out).meta["stats"]
    assert stats["binary_files_skipped"] == [str(corpus / "image.png")]
    assert stats["lines_cut"] == 1


def test_summary_and_meta_name_the_entries_never_found(roberta_dir, corpus_file, tmp_path):
    absent = ["zebra"] + [f"absent{i}" for i in range(14)]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("cat\n" + "\n".join(absent) + "\nparis\n")
    out = tmp_path / "out"
    result = run("distill", corpus_file, "--vocab", vocab, "--model", roberta_dir, "-l", "1",
                 "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert StaticVectors.load(out).meta["stats"]["entries_not_found"] == absent
    shown = ", ".join(absent[:10])
    assert f"not found in the corpus (15): {shown} and 5 more (all in meta.json)\n" in result.output
    info = run("info", out)
    assert f"  entries not found: {shown} and 5 more\n" in info.output


def test_the_summary_names_the_entries_too_long_to_fill(roberta_dir, corpus_file, tmp_path):
    phrase = " ".join(["zebra"] * 40)  # never in the corpus, and longer than the input alone
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(f"cat\nzebra\n{phrase}\n")
    out = tmp_path / "out"
    result = run("distill", corpus_file, "--vocab", vocab, "--model", roberta_dir, "-l", "1",
                 "--max-length", "16", "--fill-unseen", "decontextualized", "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "1 filled" in result.output
    line = "not filled, too long for the model's input alone (or without subwords) (1): "
    assert f"{line}{phrase} (all in meta.json)\n" in result.output
    stats = StaticVectors.load(out).meta["stats"]
    assert stats["fill"]["not_filled"] == [phrase] and "zebra" in StaticVectors.load(out)


def test_distill_prints_the_accumulator_size_before_the_run(
    roberta_dir, corpus_file, vocab_file, tmp_path
):
    result = run("distill", corpus_file, "--vocab", vocab_file, "--model", roberta_dir,
                 "-l", "1,2", "--combine", "concat", "--out", tmp_path / "out")  # fmt: skip
    assert result.exit_code == 0, result.output
    entries = len(vocab_file.read_text().splitlines())
    assert f"accumulator: {entries} entries x 64 floats = " in result.output
    assert result.output.index("accumulator:") < result.output.index("wrote ")


def test_distill_says_which_dtype_auto_chose_and_why(
    roberta_dir, corpus_file, vocab_file, tmp_path, monkeypatch
):
    fake_cpu(monkeypatch, AMX)
    result = run("distill", corpus_file, "--vocab", vocab_file, "--model", roberta_dir,
                 "-l", "1", "--out", tmp_path / "out")  # fmt: skip
    assert result.exit_code == 0, result.output
    why = "auto: the CPU has bfloat16 matrix units (AMX)"
    assert f"encoder: bfloat16 on cpu ({why})\n" in result.output
    model = StaticVectors.load(tmp_path / "out").meta["model"]
    assert (model["dtype"], model["dtype_reason"]) == ("bfloat16", why)


def test_console_script_and_module_entry_points():
    for command in (
        ["roberta-static", "--help"],
        [sys.executable, "-m", "roberta_static", "distill", "--help"],
    ):
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        assert "distill" in result.stdout


def test_error_without_traceback_in_a_real_process(tmp_path):
    result = subprocess.run(
        [
            "roberta-static",
            "distill",
            str(tmp_path / "missing.txt"),
            "--model",
            "x",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: {tmp_path / 'missing.txt'}: no such file or folder"


def test_a_run_failing_before_its_first_report_prints_only_the_error(tmp_path, corpus_file):
    not_a_model = tmp_path / "model"
    not_a_model.mkdir()
    (not_a_model / "config.json").write_text("{}")
    result = subprocess.run(
        ["roberta-static", "distill", str(corpus_file), "--model", str(not_a_model)]
        + ["--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"error: {not_a_model}: cannot load a model")


def test_distill_names_the_inputs_left_out_and_resume_needs_a_checkpoint(corpus_file, tmp_path):
    needs = "needs CORPUS, --model and --out (or --resume OUT); "
    for args, missing in (
        ([], "CORPUS, --model and --out are"),
        ([corpus_file, "--model", "minilm"], "--out is"),
        (["--model", "minilm", "--out", tmp_path / "out"], "CORPUS is"),
    ):
        result = run("distill", *args)
        assert result.exit_code == 2
        assert result.output == f"error: distill {needs}{missing} missing\n"
    assert run("finetune", corpus_file, "--out", tmp_path / "out").output == (
        f"error: finetune {needs}--model is missing\n"
    )
    missing = run("distill", "--resume", tmp_path)
    assert missing.exit_code == 1 and "no checkpoint to resume from" in missing.output


def test_spacy_init_with_an_unknown_base(tmp_path):
    result = run("spacy-init", tmp_path, tmp_path / "out", "--base", "no_such_pipeline")
    assert result.exit_code == 1 and "--base: cannot load 'no_such_pipeline'" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("mapped_cosine", [0.5, 0.9])
def test_a_mapped_fill_its_check_finds_worse_is_warned(
    roberta_dir, corpus_file, tmp_path, monkeypatch, mapped_cosine
):
    check = {"entries": 3, "mapped_cosine": mapped_cosine, "decontextualized_cosine": 0.8}
    monkeypatch.setattr("roberta_static.vectors.fill.held_out_check", lambda x, y: check)
    words = {w.strip(".,;").lower() for line in CORPUS_LINES for w in line.split()}
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join([*sorted(words), "zebra"]) + "\n")
    out = tmp_path / "out"
    result = run("distill", corpus_file, "--vocab", vocab, "--model", roberta_dir, "-l", "1",
                 "--fill-unseen", "mapped", "--out", out, "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert StaticVectors.load(out).meta["stats"]["fill"]["held_out"] == check
    warned = result.output.startswith("warning: on its held-out check the mapped fill is further")
    assert warned == (mapped_cosine < 0.8)
    assert ("mean cosine 0.500 against 0.800" in result.output) == warned


def test_a_binary_vocabulary_is_one_line_before_the_model_loads(corpus_file, tmp_path, monkeypatch):
    def no_model(config):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("roberta_static.api.load_pretrained", no_model)
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"\0" * 1024)
    out = tmp_path / "out"
    result = run("distill", corpus_file, "--vocab", vocab, "--model", "minilm", "--out", out)
    assert result.exit_code == 1 and not out.exists()
    assert (
        result.output == f"error: {vocab}:1: NUL byte: a binary file, not a vocabulary "
        "(expected UTF-8 text, one entry per line)\n"
    )


@pytest.mark.parametrize("formats", ["", " , "])
def test_export_refuses_an_empty_format_list_and_distill_takes_it_as_none(
    roberta_dir, corpus_file, vocab_file, tmp_path, formats
):
    out = tmp_path / "out"
    distilled = run("distill", corpus_file, "--vocab", vocab_file, "--model", roberta_dir,
                    "-l", "1", "--out", out, "--formats", formats, "--quiet")  # fmt: skip
    assert distilled.exit_code == 0, distilled.output
    before = sorted(path.name for path in out.iterdir())
    assert before == ["meta.json", "vectors.npy", "vocab.tsv"]
    result = run("export", out, "--formats", formats)
    assert result.exit_code == 1
    assert result.output.startswith("error: --formats: name at least one of kv, word2vec,")
    assert sorted(path.name for path in out.iterdir()) == before


def test_a_rerun_into_an_output_inside_the_corpus_folder_reads_the_same_corpus(
    roberta_dir, vocab_file, tmp_path
):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "text.txt").write_text("\n".join(CORPUS_LINES) + "\n")
    out = corpus / "out"
    args = ["distill", corpus, "--vocab", vocab_file, "--model", roberta_dir, "-l", "1",
            "--out", out, "--formats", "word2vec", "-q"]  # fmt: skip
    first = run(*args)
    assert first.exit_code == 0 and first.output == ""
    before = StaticVectors.load(out)
    again = run(*args, "--overwrite")
    assert again.exit_code == 0
    assert again.output == f"note: not read as corpus, as roberta-static wrote it: {out}\n"
    after = StaticVectors.load(out)
    text = corpus / "text.txt"
    assert after.meta["corpus"] == [{"path": str(text), "bytes": text.stat().st_size}]
    assert before.meta["corpus"] == after.meta["corpus"]
    assert after.meta["stats"]["paths_skipped"] == {str(out): "a folder roberta-static wrote"}
    assert after.words == before.words
    np.testing.assert_array_equal(after.vectors, before.vectors)


def test_pipes_and_broken_links_in_a_corpus_folder_are_warned_and_recorded(
    roberta_dir, vocab_file, tmp_path
):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "text.txt").write_text("\n".join(CORPUS_LINES) + "\n")
    os.mkfifo(corpus / "fifo")
    (corpus / "gone.txt").symlink_to("moved.txt")
    out = tmp_path / "out"
    result = run("distill", corpus, "--vocab", vocab_file, "--model", roberta_dir, "-l", "1",
                 "--out", out, "-q")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"warning: not read in the corpus folders: {corpus / 'fifo'} (a pipe), "
        f"{corpus / 'gone.txt'} (a broken symbolic link to moved.txt)\n"
    )
    assert StaticVectors.load(out).meta["stats"]["paths_skipped"] == {
        str(corpus / "fifo"): "a pipe",
        str(corpus / "gone.txt"): "a broken symbolic link to moved.txt",
    }


def reading_into(command: str, source, out, tmp_path) -> list:
    """Arguments of a command that reads ``source`` and writes the folder ``out``."""
    return {
        "postprocess": [source, out, "--center"],
        "spacy-init": [source, out],
        "merge": [tmp_path / "april", source, "--out", out],
        "tune": [source, "--out", out],
    }[command]


@pytest.mark.parametrize("command", ["postprocess", "spacy-init", "merge", "tune"])
@pytest.mark.parametrize("named", ["by its name", "through a link"])
def test_a_command_never_writes_over_the_folder_it_reads(command, named, tmp_path):
    vectors = tmp_path / "vectors"
    StaticVectors(["cat", "dog"], np.eye(2), np.array([2, 1])).save(vectors)
    export(vectors, ["kv", "word2vec"])
    out, read = vectors, ""
    if named == "through a link":
        out, read = tmp_path / "link", f" ({vectors})"
        out.symlink_to(vectors)
    before = snapshot(tmp_path)
    args = reading_into(command, vectors, out, tmp_path)
    result = run(command, *args, "--overwrite")
    assert result.exit_code == 1
    assert result.output == (
        f"error: {out}: is the folder being read{read}, which writing would replace; "
        "choose another output folder\n"
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["postprocess", "spacy-init", "merge", "tune"])
@pytest.mark.parametrize("export_format", ["word2vec", "model2vec"])
def test_a_command_never_writes_over_the_folder_holding_the_file_it_reads(
    command, export_format, tmp_path
):
    vectors = tmp_path / "vectors"
    StaticVectors(["cat", "dog"], np.eye(2), np.array([2, 1])).save(vectors)
    export(vectors, [export_format])
    source = vectors / {"word2vec": "vectors.txt", "model2vec": "model2vec"}[export_format]
    before = snapshot(tmp_path)
    args = reading_into(command, source, vectors, tmp_path)
    result = run(command, *args, "--overwrite")
    assert result.exit_code == 1
    assert result.output == (
        f"error: {vectors}: holds {source}, which is being read and which writing would replace; "
        "choose another output folder\n"
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", WRITERS)
def test_a_second_run_into_a_held_output_folder_is_refused_at_once(
    command, roberta_dir, corpus_file, vocab_file, tmp_path, monkeypatch
):
    monkeypatch.setattr("roberta_static.api.distill", never_run)
    monkeypatch.setattr("roberta_static.quality.sweep.run_sweep", never_run)
    monkeypatch.setattr("roberta_static.tuning.run.tune", never_run)
    out = tmp_path / "out"
    args = writer_args(command, out, roberta_dir, corpus_file, vocab_file, tmp_path)
    with output_lock(out):  # as another run would hold it
        result = run(*args, "--overwrite")
    assert result.exit_code == 1
    assert result.output == (
        f"error: {out}: another roberta-static run is writing it (process {os.getpid()}); "
        "wait for it to end, or choose another output folder\n"
    )
    assert not out.exists() and not (tmp_path / ".out.lock").exists()


def never_run(*args, **kwargs):
    raise AssertionError("the run started")


@pytest.mark.parametrize("command", WRITERS)
def test_an_output_folder_under_a_file_is_refused_before_any_work(
    command, roberta_dir, corpus_file, vocab_file, tmp_path, monkeypatch
):
    monkeypatch.setattr("roberta_static.api.distill", never_run)
    monkeypatch.setattr("roberta_static.quality.sweep.run_sweep", never_run)
    monkeypatch.setattr("roberta_static.tuning.run.tune", never_run)
    afile = tmp_path / "afile.txt"
    afile.write_text("mine")
    out = afile / "sub"
    result = run(*writer_args(command, out, roberta_dir, corpus_file, vocab_file, tmp_path))
    assert result.exit_code == 1
    assert result.output == f"error: {out}: cannot create output folder ({afile} is a file)\n"


def test_an_output_folder_that_cannot_be_made_is_refused_before_any_work(
    roberta_dir, corpus_file, vocab_file, tmp_path, monkeypatch
):
    # Root ignores permission bits, so the refusal is raised where the lock file is made.
    real_open = os.open

    def refuse_lock(path, *args, **kwargs):
        if str(path).endswith(".lock"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse_lock)
    monkeypatch.setattr("roberta_static.api.distill", never_run)
    out = tmp_path / "locked" / "out"
    result = run("distill", corpus_file, "--vocab", vocab_file, "--model", roberta_dir,
                 "--out", out, "-q")  # fmt: skip
    assert result.exit_code == 1
    assert result.output == f"error: {out}: cannot create output folder (Permission denied)\n"
    assert not (tmp_path / "locked").exists()


def test_standard_input_as_corpus_is_refused_saying_why(roberta_dir, vocab_file, tmp_path):
    result = run("distill", "-", "--vocab", vocab_file, "--model", roberta_dir,
                 "--out", tmp_path / "out")  # fmt: skip
    assert result.exit_code == 1
    assert result.output.startswith("error: -: standard input cannot be a corpus; corpus files")
    assert not (tmp_path / "out").exists()


def test_merge_end_to_end_and_every_command_reads_the_merged_folder(
    roberta_dir, vocab_file, tmp_path
):
    folders = []
    for month, lines in (("march", CORPUS_LINES[:3]), ("april", CORPUS_LINES[3:])):
        corpus = tmp_path / f"{month}.txt"
        corpus.write_text("\n".join(lines) + "\n")
        folders.append(tmp_path / month)
        result = run("distill", corpus, "--vocab", vocab_file, "--model", roberta_dir, "-l", "1",
                     "--max-contexts", "0", "--out", folders[-1], "-q")  # fmt: skip
        assert result.exit_code == 0, result.output
    both = tmp_path / "both"
    result = run("merge", *folders, "--out", both)
    assert result.exit_code == 0, result.output
    march, april, merged = (StaticVectors.load(f) for f in (*folders, both))
    occurrences = int(march.counts.sum() + april.counts.sum())
    assert result.output == f"wrote {both}: 7 entries (7 seen), {occurrences:,} occurrences\n"
    assert merged.counts[merged.get_index("cat")] == (
        march.counts[march.get_index("cat")] + april.counts[april.get_index("cat")]
    )
    assert [record["path"] for record in merged.meta["merged"]] == [str(f) for f in folders]
    info = run("info", both)
    assert info.exit_code == 0 and f"corpus: {tmp_path / 'april.txt'}" in info.output
    assert run("similar", both, "cat", "-n", "2").output.count("\n") == 2
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("cat\tdog\t8\ncat\tgarden\t2\ndog\tgarden\t3\n")
    assert run("evaluate", both, "--dataset", pairs).exit_code == 0
    assert run("export", both, "--formats", "kv,model2vec").exit_code == 0
    assert run("spacy-init", both, tmp_path / "pipeline").exit_code == 0


@pytest.mark.parametrize(
    "case", ["missing", "not vectors", "unreadable", "other layers", "an export file"]
)
def test_merge_refuses_in_one_line_and_writes_nothing(case, tmp_path):
    distilled(["cat"], [[1.0, 0.0]], [2]).save(tmp_path / "march")
    april = tmp_path / "april"
    if case == "an export file":  # the merge mB out/example/vectors.txt
        distilled(["dog"], [[0.0, 1.0]], [1]).save(april)
        export(april, ["word2vec"])
        april = april / "vectors.txt"
    elif case == "not vectors":
        april.mkdir()
        (april / "notes.txt").write_text("mine")
    elif case == "unreadable":
        distilled(["dog"], [[0.0, 1.0]], [1]).save(april)
        (april / "vocab.tsv").write_text("dog\n")
    elif case == "other layers":
        distilled(["dog"], [[0.0, 1.0]], [1], layers="2").save(april)
    before = snapshot(tmp_path)
    result = run("merge", tmp_path / "march", april, "--out", tmp_path / "both")
    assert result.exit_code == 1
    assert (
        result.output
        == "error: "
        + {
            "missing": f"{april}: no such vectors folder",
            "not vectors": f"{april}: not a roberta-static vectors folder (no vectors.npy)",
            "unreadable": f"{april / 'vocab.tsv'}: expected word<TAB>count on every line",
            "other layers": f"merge: {tmp_path / 'march'} and {april} differ in layers: [1] against [2]",
            "an export file": f"{april}: a file, and merge reads vectors folders only (as distill "
            "writes them: vectors.npy, vocab.tsv, meta.json; exports record no options to merge "
            f"by); pass {april.parent}, the vectors folder it is in",
        }[case]
        + "\n"
    )
    assert snapshot(tmp_path) == before


def test_a_vocabulary_an_export_cannot_hold_is_refused_before_the_model_loads(
    roberta_dir, tmp_path, monkeypatch
):
    corpus = tmp_path / "ny.txt"
    corpus.write_text("I moved to new york, the state. The tag new_york trended in the state.\n")
    vocab = tmp_path / "nyv.txt"
    vocab.write_text("new york\nnew_york\nstate\n")
    out = tmp_path / "ny"
    args = ["distill", corpus, "--vocab", vocab, "-m", roberta_dir, "-l", "1", "-o", out, "-q"]

    def no_model(config):
        raise AssertionError("the model was loaded")

    with monkeypatch.context() as patched:
        patched.setattr("roberta_static.api.load_pretrained", no_model)
        result = run(*args, "--formats", "word2vec,kv,model2vec")
    assert result.exit_code == 1 and not out.exists()
    assert result.output == (
        f"error: {vocab}: the word2vec and model2vec exports cannot hold every entry apart: "
        "'new york' and 'new_york' would both be 'new_york' (in word2vec, model2vec); keep one of "
        "each in the vocabulary, or spell them apart, or leave word2vec and model2vec out of "
        "--formats\n"
    )
    # A format that holds both takes both, each with its own vector.
    result = run(*args, "--formats", "kv")
    assert result.exit_code == 0, result.output
    vectors = StaticVectors.load(out)
    keyed = KeyedVectors.load(str(out / "vectors.kv"))
    assert sorted(keyed.index_to_key) == sorted(vectors.words) == ["new york", "new_york", "state"]
    for word in vectors.words:
        np.testing.assert_array_equal(keyed[word], vectors.vectors[vectors.words.index(word)])
    # export of that folder to a format that cannot hold it: refused, nothing written.
    before = snapshot(tmp_path)
    result = run("export", out, "--formats", "word2vec-bin,sentence-transformers")
    assert result.exit_code == 1 and snapshot(tmp_path) == before
    assert result.output.startswith(
        f"error: {out}: the word2vec-bin and sentence-transformers exports cannot hold every "
        "entry apart: 'new york' and 'new_york' would both be 'new_york'"
    )
    assert result.output.endswith(
        "; leave word2vec-bin and sentence-transformers out of --formats (the vectors folder "
        "keeps every entry)\n"
    )


def test_a_corpus_vocabulary_keeps_the_more_frequent_of_words_spelled_alike(
    roberta_dir, tmp_path, monkeypatch
):
    # spaCy's tokens hold no space, so make the counted vocabulary hold both spellings.
    counted = Vocabulary.from_corpus

    def with_a_twin(nlp, texts, case, min_count, max_vocab):
        found = counted(nlp, texts, case, min_count, max_vocab)
        return Vocabulary([*found.entries, "new york"], case)

    monkeypatch.setattr(Vocabulary, "from_corpus", with_a_twin)
    corpus = tmp_path / "ny.txt"
    corpus.write_text("new_york new_york new_york state. new york is a state.\n")
    out = tmp_path / "ny"
    result = run(
        "distill",
        corpus,
        "-m",
        roberta_dir,
        "-l",
        "1",
        "-o",
        out,
        "--formats",
        "word2vec",
        "--min-count",
        "1",
    )
    assert result.exit_code == 0, result.output
    assert (
        "left out of the vocabulary, as an export would spell them as a more frequent word (1): "
        "new york (all in meta.json)\n" in result.stdout
    )
    vectors = StaticVectors.load(out)
    assert "new_york" in vectors.words and "new york" not in vectors.words
    assert vectors.meta["stats"]["vocabulary"]["left_out"] == ["new york"]
    text = KeyedVectors.load_word2vec_format(str(out / "vectors.txt"))
    assert sorted(text.index_to_key) == sorted(vectors.words)


def test_a_resumed_run_refuses_an_export_its_vocabulary_cannot_fill(
    roberta_dir, tmp_path, monkeypatch
):
    from test_checkpoint import checkpoint_first_chunk

    corpus = tmp_path / "ny.txt"
    corpus.write_text("I moved to new york. The tag new_york trended.\n" * 300)
    vocab = tmp_path / "nyv.txt"
    vocab.write_text("new york\nnew_york\n")
    out = tmp_path / "ny"
    config = DistillConfig(model=str(roberta_dir), layers="1", max_contexts=0, chunk_sentences=8)
    checkpoint_first_chunk(corpus, vocab, config, out)
    before = snapshot(tmp_path)

    def no_model(config):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("roberta_static.api.load_pretrained", no_model)
    result = run("distill", "--resume", out, "--formats", "word2vec", "-q")
    assert result.exit_code == 1 and snapshot(tmp_path) == before
    assert result.output == (
        f"error: {out}: the run's vocabulary: the word2vec export cannot hold every entry apart: "
        "'new york' and 'new_york' would both be 'new_york'; leave word2vec out of --formats "
        "(the vectors folder keeps every entry)\n"
    )
