"""The component's ``doc_vector``: the weighted exports' document vectors through spaCy's hooks."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import spacy
from thinc.api import Config, ConfigValidationError
from typer.testing import CliRunner

from roberta_static import StaticVectors
from roberta_static.cli import app
from roberta_static.errors import ConfigError
from roberta_static.formats.exports import export
from roberta_static.spacy_plugin import RobertaStaticVectors
from roberta_static.vectors.docvectors import DocWeighting
from roberta_static.vectors.postprocess import PostProcessing, postprocess

# Two of 8 dimensions removed; a coefficient that weighs the counts below visibly.
WEIGHTING = {"remove_top_pcs": 2, "sif_coefficient": 0.01}
WORDS = ["the", "a", "of", "cat", "kitten", "dog", "car", "paris"] + [f"w{i}" for i in range(16)]


@pytest.fixture()
def spread() -> StaticVectors:
    """Lower-cased vectors sharing a common direction, with uneven counts, as distilled ones."""
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(len(WORDS), 8)) + 3
    counts = rng.integers(1, 100, len(WORDS))
    return StaticVectors(WORDS, matrix, counts, {"config": {"case": "lower"}})


@pytest.fixture()
def folder(spread, tmp_path) -> Path:
    return spread.save(tmp_path / "vectors")


@pytest.fixture()
def exported(spread, tmp_path) -> StaticVectors:
    """The model2vec export's rows of the same vectors, post-processed and SIF-weighted."""
    top = postprocess(spread, PostProcessing(remove_top_pcs=WEIGHTING["remove_top_pcs"]))
    export(top.save(tmp_path / "top"), ["model2vec"], sif_coefficient=WEIGHTING["sif_coefficient"])
    return StaticVectors.load(tmp_path / "top" / "model2vec")


def pipeline(folder: Path, doc_vector: str = "weighted") -> spacy.language.Language:
    nlp = spacy.blank("en")
    config = {"vectors": str(folder), "doc_vector": doc_vector, **WEIGHTING}
    nlp.add_pipe("roberta_static", config=config)
    return nlp


def export_vector(exported: StaticVectors, words: list[str]) -> np.ndarray:
    """The export's text vector: the mean of its known words' rows (model2vec's encode)."""
    return exported[words].mean(axis=0)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_weighted_doc_and_span_vectors_are_the_weighted_exports(folder, exported):
    doc = pipeline(folder)("The Cat and a zebra, of Paris!")  # and, zebra, punctuation: unknown
    expected = export_vector(exported, ["the", "cat", "a", "of", "paris"])
    np.testing.assert_allclose(doc.vector, expected, atol=1e-6)
    np.testing.assert_allclose(doc[1:5].vector, export_vector(exported, ["cat", "a"]), atol=1e-6)
    assert doc.vector_norm == pytest.approx(np.linalg.norm(expected), rel=1e-5)


def test_weighted_similarity_is_the_cosine_of_the_weighted_vectors(folder, exported):
    nlp = pipeline(folder)
    first, second = nlp("the cat and the kitten"), nlp("a dog of paris")
    kittens = export_vector(exported, ["the", "cat", "the", "kitten"])
    dogs = export_vector(exported, ["a", "dog", "of", "paris"])
    assert first.similarity(second) == pytest.approx(cosine(kittens, dogs), abs=1e-5)
    span = export_vector(exported, ["cat", "the", "kitten"])
    assert first[1:5].similarity(second) == pytest.approx(cosine(span, dogs), abs=1e-5)
    # A plain doc (no pipeline) is compared through the same weighting.
    plain = nlp.make_doc("a dog of paris")
    assert first.similarity(plain) == pytest.approx(cosine(kittens, dogs), abs=1e-5)
    # A token or a lexeme is one word, weighted the same way.
    kitten = export_vector(exported, ["kitten"])
    assert first.similarity(second[1]) == pytest.approx(
        cosine(kittens, export_vector(exported, ["dog"])), abs=1e-5
    )
    assert first.similarity(nlp.vocab["kitten"]) == pytest.approx(cosine(kittens, kitten), abs=1e-5)


@pytest.mark.parametrize("text", ["The Cat and a zebra, of Paris!", "zebra !", ""])
def test_mean_is_spacys_own_average(folder, text):
    doc = pipeline(folder, "mean")(text)
    hooked = [doc.vector, doc[1:].vector, doc[:0].vector]
    doc.user_hooks.clear()
    doc.user_span_hooks.clear()
    spacys = [doc.vector, doc[1:].vector, doc[:0].vector]  # spaCy's own, without the hooks
    for ours, theirs in zip(hooked, spacys, strict=True):
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


def test_doc_vector_and_its_weighting_survive_to_disk_and_bytes(folder, tmp_path):
    texts = ["the cat and the kitten", "a dog of paris", "w1 w2 of a car"]
    for doc_vector in ("weighted", "mean"):
        nlp = pipeline(folder, doc_vector)
        docs = list(nlp.pipe(texts))
        expected = [docs[0].similarity(docs[1]), docs[0].similarity(docs[2])]
        nlp.to_disk(tmp_path / doc_vector)
        restored = spacy.blank("en")
        restored.add_pipe("roberta_static", config={"doc_vector": doc_vector})
        restored.from_bytes(nlp.to_bytes())
        for loaded in (spacy.load(tmp_path / doc_vector), restored):
            assert loaded.get_pipe("roberta_static").doc_vector == doc_vector
            docs = list(loaded.pipe(texts))
            got = [docs[0].similarity(docs[1]), docs[0].similarity(docs[2])]
            assert got == pytest.approx(expected, abs=1e-6)
    shutil.rmtree(folder)  # the weighting is the pipeline's, not read from the vectors
    loaded = spacy.load(tmp_path / "weighted")
    assert "vector" in loaded("the cat").user_hooks


CONFIG = """
[nlp]
lang = "en"
pipeline = ["roberta_static"]

[components]

[components.roberta_static]
factory = "roberta_static"
doc_vector = "weighted"
remove_top_pcs = 2
sif_coefficient = 0.01

[initialize]

[initialize.before_init]
@callbacks = "roberta_static.load_vectors.v1"
path = "{path}"
"""


def test_doc_vector_from_a_training_config(folder, exported):
    config = Config().from_str(CONFIG.format(path=folder))
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    nlp.initialize()
    doc = nlp("The Cat and a zebra, of Paris!")
    expected = export_vector(exported, ["the", "cat", "a", "of", "paris"])
    np.testing.assert_allclose(doc.vector, expected, atol=1e-6)


def test_spacy_init_doc_vector(folder, tmp_path):
    runner = CliRunner()
    for args, doc_vector in (([], "weighted"), (["--doc-vector", "mean"], "mean")):
        out = tmp_path / doc_vector
        result = runner.invoke(app, ["spacy-init", str(folder), str(out), *args])
        assert result.exit_code == 0, result.output
        component = spacy.load(out).get_pipe("roberta_static")
        assert component.doc_vector == doc_vector
        assert (component.weighted is not None) == (doc_vector == "weighted")
    bad = runner.invoke(
        app, ["spacy-init", str(folder), str(tmp_path / "bad"), "--doc-vector", "median"]
    )
    assert bad.exit_code == 2 and "--doc-vector" in bad.output
    assert len(bad.output.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()


def test_a_bad_doc_vector_is_refused_in_one_line(folder):
    with pytest.raises(
        ConfigError,
        match=r"^roberta_static: doc_vector: expected 'mean' or 'weighted', got 'median'$",
    ):
        RobertaStaticVectors(spacy.blank("en"), doc_vector="median")  # type: ignore[arg-type]
    with pytest.raises(ConfigValidationError, match="doc_vector"):
        spacy.blank("en").add_pipe("roberta_static", config={"doc_vector": "median"})
    with pytest.raises(ConfigError, match=r"^sif_coefficient: must be between 0 and 1, got 2"):
        spacy.blank("en").add_pipe("roberta_static", config={"sif_coefficient": 2.0})


def test_vectors_too_few_for_the_weighting_load_with_spacys_average_and_a_warning(folder):
    nlp = spacy.blank("en")
    with pytest.warns(UserWarning, match=r"24 vectors are too few for doc_vector 'weighted'"):
        nlp.add_pipe("roberta_static", config={"vectors": str(folder), "remove_top_pcs": 9})
    assert nlp.vocab.vectors.shape[0] == 24
    doc = nlp(" ".join(WORDS[:2]))
    assert "similarity" not in doc.user_hooks  # no weighting: spaCy's cosine of the means
    np.testing.assert_allclose(doc.vector, (doc[0].vector + doc[1].vector) / 2, rtol=1e-5)
    with pytest.raises(ConfigError, match=r"^remove_top_pcs: doc_vector 'weighted' removes 9 "):
        DocWeighting.fit(StaticVectors.load(folder), 9, 1e-3)
