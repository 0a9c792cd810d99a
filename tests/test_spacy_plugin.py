"""The registered spaCy component: loading, case policy, modes, serialisation, configs, spacy-init."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import spacy
from conftest import CORPUS_LINES, VOCAB_ENTRIES
from spacy.attrs import IDS
from spacy.training import Example
from test_atomic import snapshot
from thinc.api import Config, ConfigValidationError
from typer.testing import CliRunner

from roberta_static import DistillConfig, RobertaStaticError, StaticVectors, distill
from roberta_static.cli import app
from roberta_static.errors import ConfigError, OutputError
from roberta_static.spacy_plugin.init import build_pipeline, write_pipeline

TOK2VEC = {
    "@architectures": "spacy.Tok2Vec.v2",
    "embed": {
        "@architectures": "spacy.MultiHashEmbed.v2",
        "width": 8,
        "attrs": ["NORM"],
        "rows": [50],
        "include_static_vectors": True,
    },
    "encode": {
        "@architectures": "spacy.MaxoutWindowEncoder.v2",
        "width": 8,
        "depth": 1,
        "window_size": 1,
        "maxout_pieces": 2,
    },
}


@pytest.fixture()
def handmade(tmp_path) -> Path:
    """Vectors with a known close pair (cat, kitten) and a far one (cat, car), distilled lower-cased."""
    words = ["cat", "kitten", "car", "paris", "new york"]
    matrix = np.array(
        [[1, 0, 0, 0], [0.9, 0.1, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]], dtype=np.float32
    )
    vectors = StaticVectors(words, matrix, np.array([5, 3, 4, 2, 1]), {"config": {"case": "lower"}})
    return vectors.save(tmp_path / "handmade")


@pytest.fixture(scope="module")
def distilled(roberta_dir, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("distilled")
    (folder / "corpus.txt").write_text("\n".join(CORPUS_LINES))
    vectors = distill(
        folder / "corpus.txt", None, DistillConfig(model=str(roberta_dir), layers="1", min_count=2)
    )
    return vectors.save(folder / "vectors")


def test_factory_found_through_entry_point_without_import(handmade):
    code = (
        "import spacy\n"
        "nlp = spacy.blank('en')\n"
        f"nlp.add_pipe('roberta_static', config={{'vectors': {str(handmade)!r}}})\n"
        "print(nlp.pipe_names, nlp('Kitten')[0].has_vector)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['roberta_static'] True"


def test_vectors_equal_the_distilled_ones(distilled):
    nlp = spacy.blank("en")
    nlp.add_pipe("roberta_static", config={"vectors": str(distilled), "doc_vector": "mean"})
    vectors = StaticVectors.load(distilled)
    assert nlp.vocab.vectors.shape == vectors.vectors.shape
    for word in vectors.words:
        np.testing.assert_array_equal(nlp.vocab.get_vector(word), vectors[word])
    doc = nlp("The garden and the cat.")
    np.testing.assert_allclose(doc.vector, np.mean([t.vector for t in doc], axis=0), atol=1e-6)


def test_similarity_ranks_close_pair_above_far_pair(handmade):
    nlp = spacy.blank("en")
    # 4 dimensions: the weighted doc vector's all-but-the-top would leave none
    nlp.add_pipe("roberta_static", config={"vectors": str(handmade), "doc_vector": "mean"})
    assert nlp("cat").similarity(nlp("kitten")) > nlp("cat").similarity(nlp("car"))
    doc = nlp("my cat and my car")
    assert doc[1:2].similarity(nlp("kitten")) > doc[4:5].similarity(nlp("kitten"))
    query = nlp.vocab.vectors["cat"].copy()  # most_similar normalises its query in place
    keys, _, scores = nlp.vocab.vectors.most_similar(query[None, :], n=2)
    assert nlp.vocab.strings[int(keys[0][1])] == "kitten"


def test_lower_cased_vectors_are_found_for_any_case(handmade):
    nlp = spacy.blank("en")
    nlp.add_pipe("roberta_static", config={"vectors": str(handmade)})
    assert nlp.vocab.vectors.attr == IDS["LOWER"]
    doc = nlp("Paris PARIS paris Rome")
    assert [t.has_vector for t in doc] == [True, True, True, False]
    kept = spacy.blank("en")
    kept.add_pipe("roberta_static", config={"vectors": str(handmade), "case": "keep"})
    assert [t.has_vector for t in kept("Paris paris")] == [False, True]


def test_word2vec_files_and_pickles(handmade, tmp_path):
    from roberta_static.formats.exports import export

    export(handmade, ["word2vec", "word2vec-bin", "kv"])
    for name in ("vectors.txt", "vectors.bin"):
        nlp = spacy.blank("en")
        nlp.add_pipe("roberta_static", config={"vectors": str(handmade / name)})
        assert nlp("KITTEN")[0].has_vector and nlp.vocab.vectors.shape == (5, 4)
    with pytest.raises(RobertaStaticError, match="a pickle"):
        spacy.blank("en").add_pipe(
            "roberta_static", config={"vectors": str(handmade / "vectors.kv")}
        )
    nlp = spacy.blank("en")
    nlp.add_pipe(
        "roberta_static", config={"vectors": str(handmade / "vectors.kv"), "allow_pickle": True}
    )
    assert nlp("cat")[0].has_vector


def pipeline_with_vectors():
    nlp = spacy.blank("en")
    nlp.vocab.set_vector("dog", np.full(4, 2.0, dtype=np.float32))
    nlp.vocab.set_vector("cat", np.full(4, 3.0, dtype=np.float32))
    return nlp


def test_add_keeps_existing_vectors_and_replace_drops_them(handmade):
    added = pipeline_with_vectors()
    added.add_pipe(
        "roberta_static", config={"vectors": str(handmade), "mode": "add", "case": "keep"}
    )
    assert added("dog")[0].vector.tolist() == [2.0] * 4
    assert added("cat")[0].vector.tolist() == [1.0, 0.0, 0.0, 0.0]  # ours overwrite
    assert added.vocab.vectors.n_keys == 6
    replaced = pipeline_with_vectors()
    replaced.add_pipe("roberta_static", config={"vectors": str(handmade)})
    assert not replaced("dog")[0].has_vector and replaced.vocab.vectors.n_keys == 5


def test_round_trip_without_the_source_keeps_lower_lookup(handmade, tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("roberta_static", config={"vectors": str(handmade)})
    expected = nlp("PARIS")[0].vector.copy()
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(handmade)
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.pipe_names == ["roberta_static"]
    assert loaded.vocab.vectors.attr == IDS["LOWER"]
    np.testing.assert_array_equal(loaded("PARIS")[0].vector, expected)
    restored = spacy.blank("en")
    restored.add_pipe("roberta_static")
    restored.from_bytes(nlp.to_bytes())
    assert restored.vocab.vectors.attr == IDS["LOWER"] and restored("Paris")[0].has_vector


def test_save_before_loading_any_vectors(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("roberta_static")
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.pipe_names == ["roberta_static"] and loaded.vocab.vectors.shape[0] == 0


@pytest.mark.parametrize(
    "config,error,message",
    [
        ({"vectors": 3}, ConfigValidationError, "vectors"),
        ({"mode": "merge"}, ConfigValidationError, "mode"),
        (
            {"vectors": "/no/such/vectors"},
            RobertaStaticError,
            "roberta_static: vectors: no such folder or file",
        ),
    ],
)
def test_bad_configs_name_the_option(config, error, message):
    with pytest.raises(error, match=message):
        spacy.blank("en").add_pipe("roberta_static", config=config)


def test_refuses_to_replace_vectors_trained_components_use(handmade):
    nlp = pipeline_with_vectors()
    nlp.add_pipe("tok2vec", config={"model": TOK2VEC})
    with pytest.raises(RobertaStaticError, match=r"components \['tok2vec'\] were trained on"):
        nlp.add_pipe("roberta_static", config={"vectors": str(handmade)})
    assert nlp.make_doc("dog")[0].vector.tolist() == [2.0] * 4
    nlp.add_pipe(
        "roberta_static", config={"vectors": str(handmade), "replace_trained_vectors": True}
    )
    assert nlp.make_doc("kitten")[0].has_vector


CONFIG = """
[nlp]
lang = "en"
pipeline = ["roberta_static", "tok2vec"]

[components]

[components.roberta_static]
factory = "roberta_static"

[components.tok2vec]
factory = "tok2vec"

[initialize]

[initialize.before_init]
@callbacks = "roberta_static.load_vectors.v1"
path = "{path}"
"""


def test_pipeline_from_config_feeds_tok2vec_with_static_vectors(handmade, tmp_path):
    config = Config().from_str(CONFIG.format(path=handmade))
    config["components"]["tok2vec"]["model"] = TOK2VEC
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    nlp.initialize()
    assert nlp.vocab.vectors.shape == (5, 4)
    tensor = nlp("PARIS and a Kitten").tensor
    assert tensor.shape == (4, 8)
    nlp.to_disk(tmp_path / "trained")
    shutil.rmtree(handmade)
    loaded = spacy.load(tmp_path / "trained")
    np.testing.assert_allclose(loaded("PARIS and a Kitten").tensor, tensor, atol=1e-6)


def test_initialize_components_section_loads_vectors(handmade):
    config = Config().from_str(CONFIG.format(path=handmade))
    del config["initialize"]["before_init"]
    config["components"].pop("tok2vec")
    config["nlp"]["pipeline"] = ["roberta_static"]
    config["initialize"]["components"] = {"roberta_static": {"vectors": str(handmade)}}
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    nlp.initialize()
    assert nlp("Kitten")[0].has_vector


def test_spacy_init_command(handmade, tmp_path):
    runner = CliRunner()
    out = tmp_path / "pipeline"
    result = runner.invoke(app, ["spacy-init", str(handmade), str(out)])
    assert result.exit_code == 0, result.output
    assert spacy.load(out)("Kitten")[0].has_vector
    again = runner.invoke(app, ["spacy-init", str(handmade), str(out)])
    assert again.exit_code == 1 and "pass --overwrite" in again.output
    base = pipeline_with_vectors()
    base.add_pipe("tok2vec", config={"model": TOK2VEC})
    base.initialize()
    base.to_disk(tmp_path / "base")
    refused = runner.invoke(
        app, ["spacy-init", str(handmade), str(tmp_path / "p2"), "--base", str(tmp_path / "base")]
    )
    assert refused.exit_code == 1 and "were trained on" in refused.output
    assert not (tmp_path / "p2").exists()
    # --overwrite replaces only a pipeline spacy-init wrote, never one saved otherwise.
    before = sorted(p.stat().st_mtime_ns for p in (tmp_path / "base").rglob("*"))
    theirs = runner.invoke(
        app, ["spacy-init", str(handmade), str(tmp_path / "base"), "--overwrite"]
    )
    assert theirs.exit_code == 1 and "which roberta-static did not write" in theirs.output
    assert sorted(p.stat().st_mtime_ns for p in (tmp_path / "base").rglob("*")) == before


def test_build_pipeline_adds_the_component_to_a_base_and_marks_it(handmade, tmp_path):
    nlp = build_pipeline(handmade)
    assert nlp.lang == "en" and nlp.pipe_names == ["roberta_static"]
    assert nlp.vocab.vectors.shape == (5, 4) and nlp("Kitten")[0].has_vector  # lower-cased
    assert nlp.meta["roberta_static"]["written_by"] == "roberta-static spacy-init"
    base = spacy.blank("de")
    base.add_pipe("sentencizer")
    base.to_disk(tmp_path / "base")
    built = build_pipeline(handmade, str(tmp_path / "base"))
    assert built.lang == "de" and built.pipe_names == ["sentencizer", "roberta_static"]
    with pytest.raises(ConfigError, match=r"^base: cannot load 'no_such_pipeline' \("):
        build_pipeline(handmade, "no_such_pipeline")


def test_write_pipeline_writes_a_loadable_folder_and_replaces_only_its_own(handmade, tmp_path):
    out = tmp_path / "pipeline"
    assert write_pipeline(handmade, out).vocab.vectors.shape == (5, 4)
    assert spacy.load(out)("Kitten")[0].has_vector
    spacy.blank("en").to_disk(tmp_path / "theirs")  # a pipeline, but not one spacy-init wrote
    before = snapshot(tmp_path)
    with pytest.raises(OutputError, match="pass --overwrite"):
        write_pipeline(handmade, out)
    with pytest.raises(OutputError, match="is the folder being read"):
        write_pipeline(handmade, handmade, overwrite=True)
    with pytest.raises(OutputError, match="which roberta-static did not write"):
        write_pipeline(handmade, tmp_path / "theirs", overwrite=True)
    with pytest.raises(ConfigError, match="cannot load"):
        write_pipeline(handmade, tmp_path / "new" / "pipeline", "no_such_pipeline")
    assert snapshot(tmp_path) == before
    inode = out.stat().st_ino
    write_pipeline(handmade, out, overwrite=True)
    assert out.stat().st_ino != inode and spacy.load(out)("Kitten")[0].has_vector


def test_model_from_spacy_transformers_pipeline(roberta_dir, tmp_path, corpus_file, vocab_file):
    pytest.importorskip("spacy_transformers")
    nlp = spacy.blank("en")
    nlp.add_pipe(
        "transformer",
        config={
            "model": {
                "@architectures": "spacy-transformers.TransformerModel.v3",
                "name": str(roberta_dir),
                "tokenizer_config": {"use_fast": True},
            }
        },
    )
    nlp.initialize()
    nlp.to_disk(tmp_path / "trf")
    via_spacy = distill(
        corpus_file, vocab_file, DistillConfig(model=f"spacy:{tmp_path / 'trf'}", layers="1-2")
    )
    direct = distill(corpus_file, vocab_file, DistillConfig(model=str(roberta_dir), layers="1-2"))
    assert via_spacy.words == direct.words == [w.lower() for w in VOCAB_ENTRIES if w != "zebra"]
    np.testing.assert_allclose(via_spacy.vectors, direct.vectors, atol=1e-5)


def test_add_mode_needs_same_width_and_lookup(handmade):
    narrow = spacy.blank("en")
    narrow.vocab.set_vector("dog", np.ones(3, dtype=np.float32))
    with pytest.raises(RobertaStaticError, match="width 3, these 4"):
        narrow.add_pipe("roberta_static", config={"vectors": str(handmade), "mode": "add"})
    by_orth = pipeline_with_vectors()
    with pytest.raises(RobertaStaticError, match="not looked up by LOWER"):
        by_orth.add_pipe("roberta_static", config={"vectors": str(handmade), "mode": "add"})


def test_spacy_assemble_builds_the_pipeline_from_config(handmade, tmp_path):
    config = Config().from_str(CONFIG.format(path=handmade))
    config["components"]["tok2vec"]["model"] = TOK2VEC
    config.to_disk(tmp_path / "config.cfg")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "spacy",
            "assemble",
            str(tmp_path / "config.cfg"),
            str(tmp_path / "assembled"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    shutil.rmtree(handmade)
    nlp = spacy.load(tmp_path / "assembled")
    assert nlp.pipe_names == ["roberta_static", "tok2vec"]
    assert nlp("Kitten")[0].has_vector and nlp("Kitten").tensor.shape == (1, 8)


def test_without_spacy_transformers_the_error_says_how_to_install_it(monkeypatch):
    from roberta_static.errors import ModelLoadError
    from roberta_static.model.spacy_source import load_from_spacy_pipeline

    monkeypatch.setitem(sys.modules, "spacy_transformers", None)  # its import now fails
    with pytest.raises(ModelLoadError) as caught:
        load_from_spacy_pipeline("spacy:en_core_web_trf")
    assert str(caught.value) == (
        'spacy:en_core_web_trf: needs spacy-transformers: pip install -c constraints.txt ".[trf]" '
        "in the roberta-static checkout"
    )


def test_a_pickle_refused_names_the_option_as_the_caller_spells_it(handmade, tmp_path):
    from roberta_static.formats.exports import export
    from roberta_static.spacy_plugin import create_vectors_loader

    export(handmade, ["kv"])
    kv = str(handmade / "vectors.kv")
    expected = f"allow_pickle: needed for {kv}, a pickle (gensim .kv) that can run code when loaded"
    with pytest.raises(RobertaStaticError) as from_factory:
        spacy.blank("en").add_pipe("roberta_static", config={"vectors": kv})
    with pytest.raises(RobertaStaticError) as from_loader:
        create_vectors_loader(kv)(spacy.blank("en"))
    for caught in (from_factory, from_loader):
        assert str(caught.value).startswith(expected)
    result = CliRunner().invoke(app, ["spacy-init", kv, str(tmp_path / "pipeline")])
    from_cli = "error: --allow-pickle: " + expected.removeprefix("allow_pickle: ")
    assert result.exit_code == 1 and result.output.startswith(from_cli)


TEXTCAT_CONFIG = Path(__file__).resolve().parents[1] / "examples" / "textcat_static_vectors.cfg"


def textcat_docbin(path: Path) -> Path:
    """Each corpus line as a doc, labelled POS when it mentions the cat, else NEG."""
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    docs = DocBin()
    for line in CORPUS_LINES * 2:
        doc = nlp.make_doc(line)
        positive = "cat" in line.lower()
        doc.cats = {"POS": float(positive), "NEG": float(not positive)}
        docs.add(doc)
    docs.to_disk(path)
    return path


def test_shipped_textcat_config_loads_vectors_before_init(distilled):
    config = spacy.util.load_config(
        TEXTCAT_CONFIG, overrides={"paths.static_vectors": str(distilled)}, interpolate=False
    )
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    assert any(node.name == "static_vectors" for node in nlp.get_pipe("tok2vec").model.walk())
    examples = [
        Example.from_dict(nlp.make_doc(text), {"cats": {"POS": 1.0, "NEG": 0.0}})
        for text in CORPUS_LINES
    ]
    nlp.initialize(lambda: examples)
    vectors = StaticVectors.load(distilled)
    table = nlp.vocab.vectors
    assert table.shape == vectors.vectors.shape and table.shape[1] == 32
    assert {nlp.vocab.strings[key] for key in table.key2row} == set(vectors.words)
    np.testing.assert_array_equal(
        table[nlp.vocab.strings["cat"]], vectors.vectors[vectors.words.index("cat")]
    )


def test_missing_vectors_folder_of_the_callback_is_named_in_one_line(tmp_path):
    from roberta_static.spacy_plugin import create_vectors_loader

    gone = tmp_path / "gone"
    with pytest.raises(RobertaStaticError) as caught:
        create_vectors_loader(str(gone))(spacy.blank("en"))
    assert str(caught.value) == f"roberta_static: path: no such folder or file: {gone}"


def test_spacy_train_of_the_shipped_textcat_config_with_our_vectors(distilled, tmp_path):
    data = textcat_docbin(tmp_path / "data.spacy")
    out = tmp_path / "trained"
    command = [sys.executable, "-m", "spacy", "train", str(TEXTCAT_CONFIG), "--output", str(out)]
    command += ["--paths.train", str(data), "--paths.dev", str(data)]
    command += ["--paths.static_vectors", str(distilled)]
    command += ["--training.max_steps", "4", "--training.eval_frequency", "2"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    nlp = spacy.load(out / "model-best")
    assert nlp.vocab.vectors.shape == StaticVectors.load(distilled).vectors.shape
    assert any(node.name == "static_vectors" for node in nlp.get_pipe("tok2vec").model.walk())
    assert set(nlp("The cat sat.").cats) == {"POS", "NEG"}
