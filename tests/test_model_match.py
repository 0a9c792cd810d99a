"""The layer view's model against the one meta.json records: weights decide, wherever both are."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from roberta_static.errors import ConfigError
from roberta_static.model.sources import weights_digest
from roberta_static.quality.model_match import check_model, match_model

REVISION = "0123456789abcdef0123456789abcdef01234567"


def recorded(folder: Path, name: str | None = None) -> dict:
    """The ``model`` record distill writes for a model folder (see model_fingerprint)."""
    weights_file, sha256 = weights_digest(folder)
    return {"name": name or str(folder), "path": str(folder.resolve()), "sha256": sha256,
            "weights_file": weights_file}  # fmt: skip


@pytest.fixture()
def hub_cache(tmp_path, monkeypatch, roberta_dir):
    """A Hugging Face cache holding the tiny RoBERTa as ``org/tiny`` at :data:`REVISION`."""
    from huggingface_hub import constants

    repo = tmp_path / "hub" / "models--org--tiny"
    snapshot = repo / "snapshots" / REVISION
    shutil.copytree(roberta_dir, snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return snapshot


def test_the_same_folder_or_a_copy_of_its_weights_is_the_same_model(roberta_dir, tmp_path):
    assert match_model(recorded(roberta_dir), str(roberta_dir)).verdict == "same"
    copy = shutil.copytree(roberta_dir, tmp_path / "elsewhere")
    match = match_model(recorded(roberta_dir), str(copy))
    assert match.verdict == "same" and match.recorded == str(roberta_dir)
    assert match.reason == f"the same weights, SHA-256 {recorded(roberta_dir)['sha256'][:12]}"


def test_another_model_is_refused_naming_both_unless_allowed(roberta_dir, bert_dir):
    with pytest.raises(ConfigError) as refused:
        check_model(recorded(roberta_dir), str(bert_dir))
    ours, theirs = recorded(bert_dir)["sha256"][:12], recorded(roberta_dir)["sha256"][:12]
    assert refused.value.field == "model" and str(refused.value).count("\n") == 0
    assert refused.value.problem == (
        f"{bert_dir} is not the model the vectors were distilled with, {roberta_dir} "
        f"(other weights, SHA-256 {ours} against {theirs}); give that model, or pass "
        "--allow-other-model to use this one anyway"
    )
    allowed = check_model(recorded(roberta_dir), str(bert_dir), allow_other_model=True)
    assert allowed.verdict == "other"
    assert str(allowed).startswith(f"{bert_dir}, not the model the vectors were distilled with")


def test_the_same_weights_under_a_changed_file_are_another_model(roberta_dir, tmp_path):
    copy = shutil.copytree(roberta_dir, tmp_path / "copy")
    before = recorded(copy)
    with open(copy / "model.safetensors", "ab") as handle:  # what a fine-tuning run would do
        handle.write(b"\0")
    assert match_model(before, str(copy)).verdict == "other"  # the digest is not a stale cache


def test_a_record_without_a_fingerprint_is_matched_by_name(roberta_dir, bert_dir):
    old = {"name": str(roberta_dir), "type": "roberta"}  # meta.json from before fingerprints
    same = match_model(old, str(roberta_dir))
    assert same.verdict == "same name"
    assert same.reason == "the same name; meta.json records no fingerprint of its weights"
    other = match_model(old, str(bert_dir))
    assert other.verdict == "other"
    assert other.reason == "another name, and meta.json records no fingerprint of its weights"


def test_vectors_that_record_no_model_are_not_checked(roberta_dir):
    match = check_model({}, str(roberta_dir))  # a word2vec file: no meta.json
    assert match.verdict == "unrecorded" and match.recorded is None
    assert (
        str(match)
        == f"{roberta_dir}; the vectors record no model, so whether it is theirs was not checked"
    )


def test_a_hub_model_and_a_folder_are_compared_by_the_cached_weights(
    hub_cache, roberta_dir, bert_dir
):
    from_hub = {"name": "org/tiny", "type": "roberta", "revision": REVISION}
    assert match_model(from_hub, str(roberta_dir)).verdict == "same"  # a download of it
    assert match_model(from_hub, "org/tiny").verdict == "same"
    assert match_model(from_hub, str(bert_dir)).verdict == "other"
    assert match_model(recorded(roberta_dir), "org/tiny").verdict == "same"
    assert match_model(recorded(bert_dir), "org/tiny").verdict == "other"


def test_a_hub_model_missing_from_the_cache_is_matched_by_name(hub_cache, roberta_dir):
    gone = {"name": "org/gone", "revision": REVISION}
    same = match_model(gone, "org/gone")
    assert same.verdict == "same name"
    assert (
        same.reason == "the same name; the weights of org/gone it records are not on this machine"
    )
    assert match_model(gone, str(roberta_dir)).verdict == "other"
    # The recorded folder's weights are known; the hub model's are not here to compare.
    unknown = match_model(recorded(roberta_dir), "org/gone")
    assert unknown.verdict == "other" and "no weights file of org/gone" in unknown.reason


def test_a_missing_model_folder_is_a_one_line_error(roberta_dir, tmp_path):
    from roberta_static.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="no such model folder"):
        match_model(recorded(roberta_dir), str(tmp_path / "no-model"))
