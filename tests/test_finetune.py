"""finetune: continued masked-LM training of tiny models built at test time."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import CORPUS_LINES
from typer.testing import CliRunner, Result

from roberta_static.cli import app
from roberta_static.errors import ConfigError, CorpusError, Interrupted, ModelLoadError
from roberta_static.finetune import FINETUNE_FILE, FinetuneConfig, FinetuneProgress, finetune

FAST = {"device": "cpu", "batch_size": 4, "learning_rate": 2e-3, "eval_fraction": 0.2}


@pytest.fixture(scope="module")
def mlm_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model of ``model_dir`` with a masked-LM head, as a real MLM checkpoint has."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    folder = tmp_path_factory.mktemp("mlm")
    torch.manual_seed(2)
    AutoModelForMaskedLM.from_pretrained(model_dir).save_pretrained(folder)
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(folder)
    return folder


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
from roberta_static.encoder import load_pretrained
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
    assert (tmp_path / "cut" / ".finetune").is_dir()
    resumed = finetune(corpus, tmp_path / "cut", config, resume=True)
    assert json.loads((resumed / FINETUNE_FILE).read_text())["steps"] == 5
    expected, found = _weights(whole), _weights(resumed)
    assert expected.keys() == found.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(found[name], tensor, rtol=0, atol=1e-6, msg=name)


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


@pytest.mark.parametrize("fraction", [-0.1, 0.5, 2.0])
def test_eval_fraction_out_of_range(fraction: float):
    with pytest.raises(ConfigError, match="eval_fraction"):
        FinetuneConfig("m", eval_fraction=fraction)


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
    ["not a model", "eval fraction", "empty corpus"],
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
    else:
        corpus.write_text("")
    out = tmp_path / "out"
    result = _cli(str(corpus), "--model", model, "--out", str(out), "--max-steps", "1", *extra)
    assert result.exit_code in (1, 2)  # 2: Typer's own range check (--eval-fraction)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert not out.exists()
