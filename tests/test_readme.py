"""README's quickstarts, run as written in a folder holding the files they name."""

from __future__ import annotations

import configparser
import re
import warnings

import numpy as np
from docs_examples import DOCS, ROOT, code_blocks, example_vectors, python_under

README = ROOT / "README.md"


def test_spacy_example_runs_without_empty_vectors(tmp_path, monkeypatch):
    example_vectors(tmp_path / "out" / "example")
    monkeypatch.chdir(tmp_path)
    code = python_under(README, "spaCy")
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # spaCy's W008: similarity of a doc without vectors
        exec(code, namespace)
    nlp = namespace["nlp"]
    texts = re.findall(r'nlp\("([^"]+)"\)', code)
    assert len(texts) == 2
    for text in texts:
        assert any(token.has_vector for token in nlp(text)), text


def test_spacy_example_leaves_the_vectors_as_loaded(tmp_path, monkeypatch):
    vectors = example_vectors(tmp_path / "out" / "example")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(python_under(README, "spaCy"), namespace)  # ends with the pipeline saved and reloaded
    table = namespace["nlp"].vocab.vectors
    for word in vectors.words:
        np.testing.assert_array_equal(table[word], vectors[word], err_msg=word)


def test_gensim_example_reads_the_real_counts(tmp_path, monkeypatch):
    formats = ("kv", "word2vec", "word2vec-bin")
    vectors = example_vectors(tmp_path / "out" / "example", formats)
    monkeypatch.chdir(tmp_path)
    code = python_under(README, "gensim")
    (word,) = re.findall(r'get_vecattr\("([^"]+)", "count"\)', code)
    namespace: dict = {}
    loads = 0
    for line in code.splitlines():  # one statement a line
        exec(line, namespace)
        if line.startswith("kv = "):  # each way of loading the vectors
            expected = vectors.counts[vectors.words.index(word)]
            assert namespace["kv"].get_vecattr(word, "count") == expected, line
            loads += 1
    assert loads == len(formats)


def test_python_example_distills_saves_and_queries(tmp_path, monkeypatch):
    # The example text's paragraphs about children (the query) only, so MiniLM reads little.
    lines = (ROOT / "examples" / "wiki.txt").read_text(encoding="utf-8").splitlines()
    about_children = [line for line in lines if " children " in line][:3]
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "wiki.txt").write_text("\n".join(about_children) + "\n")
    (tmp_path / "examples" / "vocab.txt").write_text((ROOT / "examples" / "vocab.txt").read_text())
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(python_under(README, "Python"), namespace)
    vecs = namespace["vecs"]
    assert (tmp_path / "out" / "python" / "vectors.npy").exists()
    assert "children" in vecs and 0 < len(vecs) <= len(vecs.words)
    kv = namespace["kv"]
    assert kv.get_vecattr(kv.index_to_key[0], "count") == vecs.counts.max()


def test_set_up_command_is_the_one_getting_started_gives():
    command = code_blocks(README)[0]
    assert command.heading == "Set up" and command.language == "bash"
    assert command.code in {b.code for b in code_blocks(DOCS / "getting-started.md")}
    assert [b.code for b in code_blocks(README) if b.heading == "Set up"][1] == "bash .ci/run\n"


def test_install_hints_work_from_a_checkout():
    """The package is on no index: README, the site and messages install extras from the checkout."""
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    extras = set(setup["options.extras_require"])
    sources = [
        p for d in ("roberta_static", "cli", "spacy_plugin") for p in (ROOT / d).rglob("*.py")
    ]
    named_extras = 0
    for path in [README, *DOCS.rglob("*.md"), *sources]:
        text = path.read_text(encoding="utf-8")
        assert "roberta-static[" not in text, path
        for named in re.findall(r'pip install -c constraints\.txt (?:-e )?"\.\[([\w,]+)\]"', text):
            assert set(named.split(",")) <= extras, (path, named)
            named_extras += 1
    assert named_extras > 5
    assert "../" not in README.read_text(encoding="utf-8")  # nothing outside it
