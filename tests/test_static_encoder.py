"""model2vec and sentence-transformers exports, loaded by the real libraries, offline."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from roberta_static.errors import ConfigError, VectorsError
from roberta_static.formats.exports import export
from roberta_static.formats.static_encoder import token_table
from roberta_static.vectors.static import StaticVectors

# Both are in the test extra; an environment pinned to older transformers may not resolve them.
MISSING = "{} is not installed (the test extra installs it where pip can resolve it)"

SENTENCE = "The cat sat near the DOG in New_York."


def model2vec_model(folder):
    static = pytest.importorskip("model2vec", reason=MISSING.format("model2vec"))
    return static.StaticModel.from_pretrained(folder)


def sentence_transformer(folder):
    st = pytest.importorskip(
        "sentence_transformers", reason=MISSING.format("sentence-transformers")
    )
    return st.SentenceTransformer(str(folder), device="cpu")


@pytest.fixture()
def folder(tmp_path):
    rng = np.random.default_rng(5)
    words = ["the", "cat", "dog", "new york", "paris"]
    meta = {
        "config": {"case": "lower", "layers": "all", "combine": "mean", "pool": "mean"},
        "model": {"name": "tiny/model", "sha256": "abc123"},
        "corpus": [{"path": "corpus.txt", "bytes": 42}],
    }
    vectors = StaticVectors(words, rng.normal(size=(5, 8)), np.array([60, 5, 3, 2, 0]), meta)
    vectors.save(tmp_path / "vectors")
    return tmp_path / "vectors"


def naive_words(text: str, vecs: StaticVectors) -> tuple[list[np.ndarray], int]:
    """Vectors of the known words of ``text`` split as words and punctuation, and the word count."""
    tokens = re.findall(r"\w+|[^\w\s]+", text.lower())
    known = [vecs[t.replace("_", " ")] for t in tokens if t.replace("_", " ") in vecs.words]
    return known, len(tokens)


def test_model2vec_export_encodes_words_and_means_of_words(folder):
    export(folder, ["model2vec"])
    vecs = StaticVectors.load(folder)
    model = model2vec_model(folder / "model2vec")
    np.testing.assert_allclose(model.encode(["cat"])[0], vecs["cat"], atol=1e-6)
    np.testing.assert_allclose(model.encode(["Paris"])[0], vecs["paris"], atol=1e-6)
    np.testing.assert_allclose(model.encode(["new_york"])[0], vecs["new york"], atol=1e-6)
    known, _ = naive_words(SENTENCE, vecs)
    assert len(known) == 5  # the, cat, the, dog, new_york; sat, near, in, "." are unknown
    np.testing.assert_allclose(model.encode([SENTENCE])[0], np.mean(known, axis=0), atol=1e-6)
    np.testing.assert_array_equal(model.encode(["zebra quagga"])[0], np.zeros(8))
    assert model.base_model_name == "tiny/model" and not model.normalize


def test_sentence_transformers_export_encodes_words_and_means_of_words(folder):
    export(folder, ["sentence-transformers"])
    vecs = StaticVectors.load(folder)
    model = sentence_transformer(folder / "sentence-transformers")
    np.testing.assert_allclose(model.encode("CAT"), vecs["cat"], atol=1e-6)
    np.testing.assert_allclose(model.encode("the dog"), (vecs["the"] + vecs["dog"]) / 2, atol=1e-6)
    # StaticEmbedding averages every token: an unknown one is a zero row that shortens the mean
    # of the known words' vectors without turning it.
    known, tokens = naive_words(SENTENCE, vecs)
    expected = np.sum(known, axis=0) / tokens
    np.testing.assert_allclose(model.encode(SENTENCE), expected, atol=1e-6)
    np.testing.assert_array_equal(model.encode("zebra"), np.zeros(8))


def test_sif_weighting_scales_each_word_by_its_frequency(folder):
    export(folder, ["model2vec", "sentence-transformers"], sif_coefficient=0.1)
    vecs = StaticVectors.load(folder)
    weight = {
        w: 0.1 / (0.1 + c / vecs.counts.sum()) for w, c in zip(vecs.words, vecs.counts, strict=True)
    }
    expected = (weight["the"] * vecs["the"] + weight["cat"] * vecs["cat"]) / 2
    m2v = model2vec_model(folder / "model2vec")
    np.testing.assert_allclose(m2v.encode(["the cat"])[0], expected, atol=1e-6)
    assert m2v.config["sif_coefficient"] == 0.1
    st = sentence_transformer(folder / "sentence-transformers")
    np.testing.assert_allclose(st.encode("the cat"), expected, atol=1e-6)
    assert "| weighting | SIF, a = 0.1 |" in (folder / "model2vec" / "README.md").read_text()


def test_case_kept_when_distilled_with_case_keep(tmp_path):
    rng = np.random.default_rng(6)
    vecs = StaticVectors(["Paris", "paris"], rng.normal(size=(2, 4)), np.ones(2))
    vecs.meta["config"] = {"case": "keep"}
    vecs.save(tmp_path / "v")
    export(tmp_path / "v", ["model2vec"])
    model = model2vec_model(tmp_path / "v" / "model2vec")
    encoded = model.encode(["Paris", "paris", "PARIS"])
    np.testing.assert_allclose(encoded[:2], vecs.vectors, atol=1e-6)
    np.testing.assert_array_equal(encoded[2], np.zeros(4))


def test_model_card_carries_the_provenance(folder):
    export(folder, ["model2vec"])
    card = (folder / "model2vec" / "README.md").read_text()
    assert card.startswith('---\nlibrary_name: "model2vec"\nbase_model: "tiny/model"\n')
    assert "| model | `tiny/model` (abc123) |" in card
    assert "| corpus | corpus.txt (42 bytes) |" in card
    assert '"sha256": "abc123"' in card  # the whole meta.json


def test_the_table_is_unknown_first_then_every_entry_and_refuses_entries_spelled_alike():
    vecs = StaticVectors(["new york", "cat", "don't"], np.eye(3), np.ones(3))
    tokenizer, matrix = token_table(vecs)
    assert tokenizer.get_vocab() == {"[UNK]": 0, "new_york": 1, "cat": 2, "don't": 3}
    np.testing.assert_array_equal(matrix, [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    # Before, the first spelling took the token and new_york's vector was silently dropped.
    twins = StaticVectors(["new york", "new_york", "cat"], np.eye(3), np.ones(3))
    with pytest.raises(VectorsError, match="'new york' and 'new_york' would both be 'new_york'"):
        token_table(twins)


def test_entries_the_word_split_would_cut_are_tokens_where_they_stand_alone(tmp_path):
    words = ["u.s.", "army", "don't", "n't", "e-mail", "do"]
    vecs = StaticVectors(words, np.random.default_rng(2).normal(size=(6, 4)), np.ones(6))
    vecs.meta["config"] = {"case": "lower"}
    export(vecs.save(tmp_path / "v"), ["model2vec", "sentence-transformers"])
    m2v = model2vec_model(tmp_path / "v" / "model2vec")
    st = sentence_transformer(tmp_path / "v" / "sentence-transformers")
    for word in words:  # each one whole, by both libraries
        np.testing.assert_allclose(m2v.encode([word.upper()])[0], vecs[word], atol=1e-6)
        np.testing.assert_allclose(st.encode(word), vecs[word], atol=1e-6)
    # In a sentence, where it stands as a word of its own; never inside a longer word.
    sentence = "The U.S. army: don't e-mail (n't)"
    expected = np.mean([vecs[w] for w in ["u.s.", "army", "don't", "e-mail", "n't"]], axis=0)
    np.testing.assert_allclose(m2v.encode([sentence])[0], expected, atol=1e-6)
    assert m2v.tokenizer.encode("I don't", add_special_tokens=False).tokens == ["[UNK]", "don't"]


@pytest.mark.parametrize(
    ("words", "case", "clash"),
    [
        (["Paris", "paris"], "lower", "'Paris' and 'paris' would both be 'paris'"),
        (["caf\u00e9", "cafe\u0301"], "keep", r"'caf\xe9' and 'cafe\u0301' would both be 'café'"),
        (["[UNK]", "cat"], "keep", "'[UNK]' would be the unknown token"),
        (["", "cat"], "keep", "'' is empty"),
    ],
)
def test_entries_the_tokenizer_cannot_hold_apart_are_refused(tmp_path, words, case, clash):
    vecs = StaticVectors(words, np.eye(2), np.ones(2), {"config": {"case": case}})
    folder = vecs.save(tmp_path / "v")
    for fmt in ("model2vec", "sentence-transformers"):
        with pytest.raises(VectorsError) as refused:
            export(folder, [fmt])
        assert str(refused.value) == (
            f"{folder}: the {fmt} export cannot hold every entry apart: {clash}; leave {fmt} out "
            "of --formats (the vectors folder keeps every entry)"
        )
    assert sorted(path.name for path in folder.iterdir()) == [
        "meta.json",
        "vectors.npy",
        "vocab.tsv",
    ]


def test_existing_export_needs_overwrite_and_bad_weights_are_refused(folder):
    export(folder, ["model2vec"])
    (folder / "model2vec" / "stale.txt").write_text("old")
    with pytest.raises(
        VectorsError, match=r"model2vec \(the model2vec export\): exists; pass --ov"
    ):
        export(folder, ["model2vec"])
    # A file the writer never makes is the user's: --overwrite does not replace its folder.
    with pytest.raises(VectorsError, match="holds stale.txt, which roberta-static did not write"):
        export(folder, ["model2vec"], overwrite=True)
    assert (folder / "model2vec" / "stale.txt").read_text() == "old"
    (folder / "model2vec" / "stale.txt").unlink()
    export(folder, ["model2vec"], overwrite=True)
    assert (folder / "model2vec" / "model.safetensors").exists()
    with pytest.raises(ConfigError, match="sif_coefficient: weights the model2vec and sentence"):
        export(folder, ["word2vec"], sif_coefficient=1e-3)
    with pytest.raises(ConfigError, match="sif_coefficient: must be between 0 and 1, got 1.5"):
        export(folder, ["model2vec"], overwrite=True, sif_coefficient=1.5)


def test_exported_files_follow_the_umask(folder):
    import os
    import stat

    old = os.umask(0o027)
    try:
        export(folder, ["model2vec", "sentence-transformers"])
    finally:
        os.umask(old)
    for library in ("model2vec", "sentence-transformers"):
        modes = {
            path.name: stat.S_IMODE(path.stat().st_mode) for path in (folder / library).iterdir()
        }
        assert modes["model.safetensors"] == 0o640 and set(modes.values()) == {0o640}, modes


def help_of(output: str, begins: str) -> str:
    """The text of the option whose help begins with ``begins``, joined across the lines it wraps."""
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if begins in line)
    column = lines[first].index(begins)
    cells = [lines[first][column:]]
    for line in lines[first + 1 :]:
        if "--" in line[:column] or not line.startswith("│"):
            break  # the next option, or the end of the box
        cells.append(line[column:])
    return " ".join(" ".join(cells).replace("│", " ").split())


def test_sif_help_reads_whole_at_80_columns():
    from typer.testing import CliRunner

    from roberta_static.cli import app
    from roberta_static.cli.options import SIF_COEFFICIENT

    for command in ("distill", "export"):
        output = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80"}).output
        shown = help_of(output, SIF_COEFFICIENT.help[:12])
        assert shown == SIF_COEFFICIENT.help and shown.endswith(" is 1e-3"), (command, shown)


def test_each_writer_makes_exactly_the_files_an_overwrite_may_replace(folder):
    from roberta_static.formats.exports import FORMATS

    export(folder, ["model2vec", "sentence-transformers"])
    assert {p.name for p in (folder / "model2vec").iterdir()} == FORMATS["model2vec"].owns
    names = {p.name for p in (folder / "sentence-transformers").iterdir()}
    assert names == FORMATS["sentence-transformers"].owns


@pytest.mark.parametrize("fmt", ["word2vec", "word2vec-bin"])
def test_a_counts_file_the_user_made_is_not_replaced_without_overwrite(folder, fmt):
    (folder / "vectors.vocab").write_text("my own notes\n")
    before = sorted(path.name for path in folder.iterdir())
    with pytest.raises(
        VectorsError,
        match=rf"vectors.vocab: exists, and holds other than what {fmt} would write there \(a file "
        r"word2vec and word2vec-bin share\); pass --overwrite to replace it$",
    ):
        export(folder, [fmt])
    assert (folder / "vectors.vocab").read_text() == "my own notes\n"
    assert sorted(path.name for path in folder.iterdir()) == before


def test_modules_json_is_followed_only_inside_the_model_folder(folder, tmp_path):
    export(folder, ["sentence-transformers"])
    exported = folder / "sentence-transformers"
    modules = json.loads((exported / "modules.json").read_text())
    model, outside = tmp_path / "model", tmp_path / "outside"
    shutil.copytree(exported, model)
    for module in (model / "0_StaticEmbedding", outside):
        module.mkdir()
        for name in ("model.safetensors", "tokenizer.json"):
            shutil.copy(exported / name, module / name)
    (model / "linked").symlink_to(outside)

    def pointing_at(path: str) -> None:
        (model / "modules.json").write_text(json.dumps([{**modules[0], "path": path}]))

    pointing_at("0_StaticEmbedding")
    assert StaticVectors.load(model).words == StaticVectors.load(exported).words
    for elsewhere in ("../outside", str(outside), "linked"):
        pointing_at(elsewhere)
        with pytest.raises(VectorsError) as caught:
            StaticVectors.load(model)
        assert str(caught.value) == (
            f"{model}: modules.json puts the StaticEmbedding module at {elsewhere!r}, outside "
            "the model folder; only modules inside it are read"
        )
