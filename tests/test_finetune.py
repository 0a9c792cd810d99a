"""finetune: continued masked-LM training of tiny models built at test time."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import CORPUS_LINES, PausedRun
from test_atomic import snapshot
from typer.testing import CliRunner, Result

from roberta_static.cli import app
from roberta_static.errors import ConfigError, CorpusError, Interrupted, ModelLoadError, OutputError
from roberta_static.finetune.config import FinetuneConfig
from roberta_static.finetune.data import (
    SeededMasking,
    SentenceBlocks,
    masking_collator,
    special_tokens,
)
from roberta_static.finetune.run import FINETUNE_FILE, finetune, saved_config
from roberta_static.finetune.training import SECONDS_FILE
from roberta_static.progress import FinetuneProgress

FAST = {"device": "cpu", "batch_size": 4, "learning_rate": 2e-3, "eval_fraction": 0.2}


def _with_mlm_head(model_dir: Path, folder: Path) -> Path:
    """The tiny model of ``model_dir`` with a masked-LM head, as a real MLM checkpoint has."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    torch.manual_seed(2)
    AutoModelForMaskedLM.from_pretrained(model_dir).save_pretrained(folder)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def mlm_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _with_mlm_head(model_dir, tmp_path_factory.mktemp("mlm"))


@pytest.fixture(scope="module")
def roberta_mlm_dir(roberta_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _with_mlm_head(roberta_dir, tmp_path_factory.mktemp("roberta-mlm"))


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "domain.txt"
    path.write_text("\n".join(CORPUS_LINES * 4) + "\n", encoding="utf-8")
    return path


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


@pytest.fixture(scope="module")
def trained(mlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[float]]:
    """A 24-step run on the test corpus, and its loss at every step."""
    corpus = tmp_path_factory.mktemp("corpus") / "domain.txt"
    corpus.write_text("\n".join(CORPUS_LINES * 4) + "\n", encoding="utf-8")
    losses: list[float] = []
    out = tmp_path_factory.mktemp("trained") / "out"
    finetune(
        corpus,
        out,
        FinetuneConfig(str(mlm_dir), max_steps=24, **FAST),
        progress=lambda report: losses.append(report.loss),
    )
    return out, losses


def test_loss_falls_and_perplexity_is_recorded(trained: tuple[Path, list[float]]):
    out, losses = trained
    record = json.loads((out / FINETUNE_FILE).read_text())
    assert record["steps"] == len(losses) == 24 and record["tokens_seen"] > 0
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.3
    held_out = record["held_out"]
    assert held_out["perplexity_after"] < held_out["perplexity_before"]
    assert record["mlm_head"]["new"] is False
    assert not (out / ".finetune").exists()


_LOAD_BOTH = """
import sys
from roberta_static import DistillConfig
from roberta_static.cli import app
from roberta_static.model.loading import load_pretrained
for folder in sys.argv[1:]:
    load_pretrained(DistillConfig(model=folder))
    print("--- loaded", file=sys.stderr, flush=True)
"""


def test_output_loads_in_distill_without_head_warnings(
    trained: tuple[Path, list[float]], tmp_path: Path
):
    out = trained[0]
    # The same weights without the finetune record: transformers warns about the unused head
    # (5.x) or the missing pooler (4.x logs the unused head at info level).
    bare = tmp_path / "bare"
    shutil.copytree(out, bare)
    (bare / FINETUNE_FILE).unlink()
    # transformers' log handler holds the stderr of its first use: read a fresh process's.
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_BOTH, str(out), str(bare)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    finetuned, without_record, _ = result.stderr.split("--- loaded")
    head = ("lm_head", "cls.predictions", "pooler")
    assert not any(name in finetuned for name in head), finetuned
    assert any(name in without_record for name in head), without_record


def test_resume_after_interrupt_matches_uninterrupted(mlm_dir: Path, corpus: Path, tmp_path: Path):
    import torch

    config = FinetuneConfig(str(mlm_dir), max_steps=5, save_every=100, **FAST)
    whole = finetune(corpus, tmp_path / "whole", config)
    stop = threading.Event()

    def stop_at_2(report: FinetuneProgress) -> None:
        if report.step == 2:
            stop.set()

    with pytest.raises(Interrupted, match="--resume"):
        finetune(corpus, tmp_path / "cut", config, progress=stop_at_2, stop=stop)
    run_dir = tmp_path / "cut" / ".finetune"
    # A crash while saving a later checkpoint: all but trainer_state.json, which comes last.
    (saved,) = run_dir.glob("checkpoint-*")
    assert int(saved.name.split("-")[1]) < 4
    shutil.copytree(saved, run_dir / "checkpoint-4")
    (run_dir / "checkpoint-4" / "trainer_state.json").unlink()
    # The time trained before the stop, kept with the checkpoint, counts in the record.
    seconds = json.loads((saved / SECONDS_FILE).read_text())["seconds"]
    assert 0 < seconds < 600
    (saved / SECONDS_FILE).write_text(json.dumps({"seconds": seconds + 1000}))
    assert saved_config(tmp_path / "cut") == config
    resumed = finetune(corpus, tmp_path / "cut", config, resume=True)
    record = json.loads((resumed / FINETUNE_FILE).read_text())
    assert record["steps"] == 5 and record["seconds"] > seconds + 1000
    expected, found = _weights(whole), _weights(resumed)
    assert expected.keys() == found.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(found[name], tensor, rtol=0, atol=1e-6, msg=name)


def test_resume_without_a_complete_checkpoint_is_one_line(
    mlm_dir: Path, corpus: Path, tmp_path: Path
):
    run_dir = tmp_path / "out" / ".finetune"
    (run_dir / "checkpoint-3").mkdir(parents=True)  # cut short before trainer_state.json
    record = {"config": FinetuneConfig(str(mlm_dir), max_steps=5, **FAST).to_dict()}
    (run_dir / FINETUNE_FILE).write_text(json.dumps(record))
    result = _cli(str(corpus), "--resume", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"error: {tmp_path / 'out'}: nothing to resume (no complete checkpoint in {run_dir}); "
        "start again with --overwrite"
    ]


def test_saved_config_is_the_interrupted_run_s_options(tmp_path: Path):
    config = FinetuneConfig("m", max_steps=5, **FAST)
    run_dir = tmp_path / "out" / ".finetune"
    run_dir.mkdir(parents=True)
    (run_dir / FINETUNE_FILE).write_text(json.dumps({"config": config.to_dict()}))
    assert saved_config(tmp_path / "out") == config
    for folder in (tmp_path / "out" / ".finetune", tmp_path / "nowhere"):
        with pytest.raises(
            ConfigError, match=f"^{re.escape(str(folder))}: no interrupted fine-tuning run"
        ):
            saved_config(folder)


def test_finetune_never_writes_over_the_model_it_reads(
    roberta_dir: Path, corpus: Path, tmp_path: Path
):
    # A fine-tuned model is an output --overwrite may replace: but not while it is being read.
    model = shutil.copytree(roberta_dir, tmp_path / "model")
    (model / FINETUNE_FILE).write_text("{}")
    before = snapshot(tmp_path)
    with pytest.raises(
        OutputError, match=f"^{re.escape(str(model))}: is the folder being read, which"
    ):
        finetune(corpus, model, FinetuneConfig(str(model), **FAST), overwrite=True)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("eval_fraction", ["0", "0.2"])  # found while training / measuring
def test_bad_input_found_mid_run_leaves_nothing(mlm_dir: Path, tmp_path: Path, eval_fraction: str):
    corpus = tmp_path / "corpus.jsonl"
    lines = [json.dumps({"body": line}) for line in (CORPUS_LINES * 4)[:20]]
    corpus.write_text("\n".join([*lines, '{"body": "cut short'] * 2) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    result = _cli(str(corpus), "--model", str(mlm_dir), "--out", str(out), "--text-field", "body",
                  "--max-steps", "30", "--device", "cpu", "--eval-fraction", eval_fraction, "-q")  # fmt: skip
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith("error: ") and ":21" in line, line
    assert not out.exists()


def test_resume_refuses_another_corpus_and_new_options(mlm_dir: Path, corpus: Path, tmp_path: Path):
    from roberta_static.text.corpus import CorpusIdentity, Position

    out = tmp_path / "out"
    (out / ".finetune").mkdir(parents=True)
    record = {
        "config": FinetuneConfig(str(mlm_dir), max_steps=5, **FAST).to_dict(),
        "corpus": CorpusIdentity.of([corpus], Position(1, 0, 1, 0)).records(),
    }
    (out / ".finetune" / FINETUNE_FILE).write_text(json.dumps(record))
    other = tmp_path / "other.txt"
    other.write_text("Another domain altogether.\n", encoding="utf-8")
    result = _cli(str(other), "--resume", str(out))
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"error: {out}: cannot resume over another corpus: {other} is not {corpus} (the run "
        f"trains on {corpus})"
    ]
    renamed = tmp_path / "renamed.txt"
    shutil.copy(corpus, renamed)
    result = _cli(str(renamed), "--resume", str(out))  # the same text passes, to the checkpoints
    assert "nothing to resume" in result.output
    result = _cli(str(corpus), "--resume", str(out), "--max-steps", "40", "--seed", "1")
    assert result.exit_code == 2  # a usage error: the command line alone shows it
    assert result.output.splitlines() == [
        f"error: --max-steps, --seed with --resume: a resumed run keeps the options it started "
        f"with (in {out / '.finetune' / FINETUNE_FILE}); leave them out"
    ]


def _finetune_cli(*args: object) -> list[str]:
    return ["roberta-static", "finetune", *map(str, args), "-q"]


def test_ctrl_c_saves_and_the_resumed_cli_run_ends_with_the_same_weights(
    roberta_mlm_dir: Path, corpus: Path, tmp_path: Path
):
    """Also takes --whole-word-mask and --batch-tokens through training and resuming."""
    import torch

    budget, steps = 200, 10
    options = {"max_steps": steps, "batch_tokens": budget, "whole_word_mask": True}
    options.update({"device": "cpu", "learning_rate": 2e-3, "eval_fraction": 0.2})
    reference = finetune(
        corpus, tmp_path / "reference", FinetuneConfig(str(roberta_mlm_dir), **options)
    )
    flags = [corpus, "--model", roberta_mlm_dir, "--max-steps", steps, "--batch-tokens", budget, "--whole-word-mask", "--device", "cpu",
             "--learning-rate", 2e-3, "--eval-fraction", 0.2]  # fmt: skip
    out = tmp_path / "out"
    run = PausedRun(
        _finetune_cli(*flags, "--out", out),
        "roberta_static.finetune.training:_Report.on_step_end",  # signalled after the first step
        tmp_path / "pause",
    )
    stderr = run.signal(signal.SIGINT)
    process = run.process
    assert process.returncode == 130, stderr
    assert stderr.startswith("stopping... (Ctrl-C again to quit now)"), stderr
    assert f"continue with --resume {out}" in stderr
    # Only the stop saves: checkpoints are due every 500 steps.
    (saved,) = (out / ".finetune").glob("checkpoint-*")
    assert 0 < int(saved.name.split("-")[1]) < steps and not (out / FINETUNE_FILE).exists()

    subprocess.run(_finetune_cli(corpus, "--resume", out), check=True)
    record = json.loads((out / FINETUNE_FILE).read_text())
    assert record["steps"] == steps == json.loads((reference / FINETUNE_FILE).read_text())["steps"]
    assert (
        record["config"]["whole_word_mask"] is True and record["config"]["batch_tokens"] == budget
    )
    # A step holds budget // 64 blocks of at most 64 tokens (the tiny models' limit), padded.
    assert record["blocks_per_step"] == budget // 64
    assert steps * 64 < record["tokens_seen"] <= steps * budget
    expected, found = _weights(reference), _weights(out)
    assert expected.keys() == found.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(found[name], tensor, rtol=0, atol=1e-6, msg=name)


def test_ctrl_c_before_training_ends_at_once_leaving_nothing(
    mlm_dir: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A stop while the first perplexity is measured: one line, status 130, nothing saved."""
    from roberta_static.finetune.training import Training

    def interrupted(self: Training, trainer: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # the CLI's handler runs here, in the main thread
        raise AssertionError("the stop should have ended the run")

    monkeypatch.setattr(Training, "_held_out_loss", interrupted)
    out = tmp_path / "out"
    result = _cli(str(corpus), "--model", str(mlm_dir), "--out", str(out), "--max-steps", "2", "-q")
    assert result.exit_code == 130, result.output
    # The handler's "stopping..." goes to file descriptor 2, past CliRunner.
    assert result.output.splitlines() == ["stopped before training began; nothing was saved"]
    assert not out.exists()


def test_headless_model_refused_then_given_a_new_tied_head(
    roberta_dir: Path, corpus: Path, tmp_path: Path
):
    out = tmp_path / "out"
    with pytest.raises(ModelLoadError, match="--init-mlm-head"):
        finetune(corpus, out, FinetuneConfig(str(roberta_dir), max_steps=2, **FAST))
    assert not out.exists()
    finetune(corpus, out, FinetuneConfig(str(roberta_dir), max_steps=2, init_mlm_head=True, **FAST))
    head = json.loads((out / FINETUNE_FILE).read_text())["mlm_head"]
    assert head["new"] is True and head["tied_to_input_embeddings"] is True
    assert head["initialized_weights"]
    result = _cli(str(corpus), "--model", str(roberta_dir), "--out", str(tmp_path / "cli"),
                  "--init-mlm-head", "--max-steps", "1", "--device", "cpu", "--eval-fraction", "0.2")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "(before: of the new head's random weights)" in result.output


@pytest.mark.parametrize("whole_words", [True, False])
def test_whole_word_masking_masks_every_subword_of_a_masked_word(
    model_dir: Path, whole_words: bool, tmp_path: Path
):
    from transformers import AutoTokenizer

    from roberta_static.text.corpus import Corpus
    from roberta_static.text.segment import load_segmenter

    path = tmp_path / "short.txt"  # sentences shorter than a block: none is cut
    path.write_text("\n".join(CORPUS_LINES[:5] * 3) + "\n", encoding="utf-8")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    nlp = load_segmenter("en", None)
    blocks = SentenceBlocks(Corpus([path]), nlp, tokenizer, 64, 0.0, offsets=True)
    features = list(blocks)
    assert len(features) > 1
    # Each token's word as the tokenizer's own pre-tokenizer splits the sentence.
    words = [
        (number, word)
        for number, sentence in enumerate(blocks.sentences())
        for word in tokenizer(sentence, add_special_tokens=False).word_ids()
    ]
    prefix, suffix = special_tokens(tokenizer)
    places = [
        (row, column)
        for row, feature in enumerate(features)
        for column in range(len(prefix), len(feature["input_ids"]) - len(suffix))
    ]
    assert len(places) == len(words)
    if not whole_words:
        features = [{"input_ids": feature["input_ids"]} for feature in features]
    batch = SeededMasking(masking_collator(tokenizer, 0.4, whole_words), seed=0)(features)
    masked = batch["labels"] != -100
    states = defaultdict(set)
    for (row, column), word in zip(places, words, strict=True):
        states[word].add(bool(masked[row, column]))
    sizes = defaultdict(int)
    for word in words:
        sizes[word] += 1
    assert any(size > 1 for size in sizes.values())  # words of several subwords
    partly = [word for word, seen in states.items() if seen == {True, False}]
    assert masked.any()
    if whole_words:
        assert partly == []
        assert (batch["input_ids"][masked] == tokenizer.mask_token_id).all()
    else:
        assert partly


def test_whole_word_masks_match_transformers_5(model_dir: Path, tmp_path: Path):
    """Our transformers 4.5x masking draws the masks transformers 5's collator draws."""
    import torch
    from transformers import AutoTokenizer

    from roberta_static.finetune.data import WholeWordMasking
    from roberta_static.text.corpus import Corpus
    from roberta_static.text.segment import load_segmenter

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    library = WholeWordMasking(tokenizer, 0.3)
    if library.library is None:
        pytest.skip("transformers 4.5x has no whole-word masking by offsets to compare with")
    ours = WholeWordMasking(tokenizer, 0.3)
    ours.library = None
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS_LINES * 2) + "\n", encoding="utf-8")
    corpus, nlp = Corpus([path]), load_segmenter("en", None)
    features = list(SentenceBlocks(corpus, nlp, tokenizer, 64, 0.0, offsets=True))
    expected, found = SeededMasking(library, 3)(features), SeededMasking(ours, 3)(features)
    for key in ("input_ids", "attention_mask", "labels"):
        assert torch.equal(found[key], expected[key]), key


@pytest.mark.parametrize("fraction", [-0.1, 0.51, 2.0])
def test_eval_fraction_out_of_range(fraction: float):
    with pytest.raises(ConfigError, match="eval_fraction"):
        FinetuneConfig("m", eval_fraction=fraction)


@pytest.mark.parametrize(
    ("option", "value", "accepted"),
    [("--epochs", "0", False), ("--learning-rate", "0", False), ("--mlm-probability", "0", False),
     ("--mlm-probability", "1", True), ("--eval-fraction", "0.5", True), ("--warmup-ratio", "1", True)],
)  # fmt: skip
def test_cli_ranges_are_the_library_ranges(option: str, value: str, accepted: bool):
    """A boundary the library refuses is a usage error (status 2), as --help shows it."""
    result = _cli("corpus.txt", "--model", "m", "--out", "out", option, value, "--quiet",
                  "--resume", "nowhere")  # fmt: skip
    if accepted:  # past Typer: the --resume check comes next, a usage error too
        assert result.exit_code == 2, result.output
        assert option in result.output and "with --resume" in result.output
        FinetuneConfig("m", **{option[2:].replace("-", "_"): float(value)})
    else:
        assert result.exit_code == 2 and f"{value} is not > 0" in result.output, result.output


def test_help_describes_finetune_s_own_device_option():
    text = " ".join(_cli("--help").output.split())
    assert "one encoder on each" not in text and "one device" in text


def test_training_reads_through_a_segmenter_that_keeps_within_its_strings_limit(
    mlm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import threading

    from roberta_static.finetune.training import Training
    from roberta_static.text.corpus import Corpus

    path = tmp_path / "open.txt"  # every line brings new words, as a dump's do
    path.write_text("".join(f"the cat w{n}a w{n}b sat by the bank.\n" for n in range(2_000)))
    config = FinetuneConfig(str(mlm_dir), **FAST)
    training = Training(Corpus([path]), config, tmp_path / "run", None, threading.Event())
    plain = list(training.train_blocks.sentences())
    monkeypatch.setattr("roberta_static.text.segment.STRINGS_BEFORE_RELOAD", 1_000)
    assert list(training.train_blocks.sentences()) == plain
    assert len(training.train_blocks.nlp.nlp.vocab.strings) < 2_000


def test_batch_tokens_gives_the_blocks_a_budget_holds():
    assert FinetuneConfig("m", batch_tokens=100).blocks_per_batch(32) == 3
    assert FinetuneConfig("m", batch_tokens=64).blocks_per_batch(64) == 1
    assert FinetuneConfig("m").blocks_per_batch(32) == 8
    assert FinetuneConfig("m", batch_size=5).blocks_per_batch(32) == 5
    with pytest.raises(ConfigError, match=r"batch_tokens: must hold one block .*\(64 tokens\)"):
        FinetuneConfig("m", batch_tokens=63, max_length=64)
    with pytest.raises(ConfigError, match="batch_tokens: cannot be combined with a batch size"):
        FinetuneConfig("m", batch_size=4, batch_tokens=256)


def test_empty_corpus_refused(roberta_dir: Path, tmp_path: Path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="no text"):
        finetune(empty, tmp_path / "out", FinetuneConfig(str(roberta_dir), **FAST))
    assert not (tmp_path / "out").exists()


def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["finetune", *args])


@pytest.mark.parametrize(
    "problem",
    ["not a model", "eval fraction", "empty corpus", "batch size and tokens", "small budget"],
)
def test_cli_bad_inputs_one_line_nothing_left(
    problem: str, roberta_dir: Path, corpus: Path, tmp_path: Path
):
    model, extra = str(roberta_dir), []
    if problem == "not a model":
        model = str(tmp_path / "notamodel")
        Path(model).mkdir()
        (Path(model) / "readme.txt").write_text("hello")
    elif problem == "eval fraction":
        extra = ["--eval-fraction", "0.9"]
    elif problem == "batch size and tokens":
        extra = ["--batch-size", "4", "--batch-tokens", "256"]
    elif problem == "small budget":  # below the tiny models' 64-token limit
        extra = ["--batch-tokens", "40"]
    else:
        corpus.write_text("")
    out = tmp_path / "out"
    result = _cli(str(corpus), "--model", model, "--out", str(out), "--max-steps", "1", *extra)
    assert result.exit_code in (1, 2)  # 2: Typer's own range check (--eval-fraction)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    if "batch" in problem:
        assert lines[0].startswith("error: --batch-tokens: "), result.output
    assert not out.exists()


def test_output_files_follow_the_umask(mlm_dir: Path, corpus: Path, tmp_path: Path):
    import os
    import stat

    old = os.umask(0o027)
    try:
        finetune(corpus, tmp_path / "out", FinetuneConfig(str(mlm_dir), max_steps=1, **FAST))
    finally:
        os.umask(old)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in (tmp_path / "out").iterdir()}
    assert modes["model.safetensors"] == 0o640 and set(modes.values()) == {0o640}, modes
