"""README's gensim and spaCy examples, run as written on vectors of the example vocabulary."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

from roberta_static.formats.exports import export
from roberta_static.vectors.static import StaticVectors

ROOT = Path(__file__).resolve().parents[1]


def readme_code(heading: str) -> str:
    """The first Python block under a README heading."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def example_vectors(folder: Path) -> StaticVectors:
    """Random vectors for the example vocabulary, with distinct counts."""
    words = [w for w in (ROOT / "examples" / "vocab.txt").read_text().splitlines() if w]
    matrix = np.random.default_rng(0).normal(size=(len(words), 16))
    vectors = StaticVectors(words, matrix, np.arange(len(words)) * 3 + 1)
    vectors.save(folder)
    return vectors


def test_spacy_example_runs_without_empty_vectors(tmp_path, monkeypatch):
    example_vectors(tmp_path / "out" / "example")
    monkeypatch.chdir(tmp_path)
    code = readme_code("Use in spaCy")
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # spaCy's W008: similarity of a doc without vectors
        exec(code, namespace)
    nlp = namespace["nlp"]
    texts = re.findall(r'nlp\("([^"]+)"\)', code)
    assert len(texts) == 2
    for text in texts:
        assert any(token.has_vector for token in nlp(text)), text


def test_gensim_example_reads_the_real_counts(tmp_path, monkeypatch):
    vectors = example_vectors(tmp_path / "vectors")
    export(tmp_path / "vectors", ["kv", "word2vec", "word2vec-bin"])
    monkeypatch.chdir(tmp_path)
    code = readme_code("gensim")
    (word,) = re.findall(r'get_vecattr\("([^"]+)", "count"\)', code)
    namespace: dict = {}
    for line in code.splitlines():  # one statement a line
        exec(line, namespace)
        if line.startswith("kv = "):  # each way of loading the vectors
            expected = vectors.counts[vectors.words.index(word)]
            assert namespace["kv"].get_vecattr(word, "count") == expected, line


def test_spacy_example_leaves_the_vectors_as_loaded(tmp_path, monkeypatch):
    vectors = example_vectors(tmp_path / "out" / "example")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(readme_code("Use in spaCy"), namespace)  # ends with the pipeline saved and reloaded
    table = namespace["nlp"].vocab.vectors
    for word in vectors.words:
        np.testing.assert_array_equal(table[word], vectors[word], err_msg=word)


def test_install_hints_work_from_a_checkout():
    """The package is on no index: README and messages install extras from the checkout."""
    import configparser

    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    extras = set(setup["options.extras_require"])
    sources = [
        p for d in ("roberta_static", "cli", "spacy_plugin") for p in (ROOT / d).rglob("*.py")
    ]
    for path in [ROOT / "README.md", *sources]:
        text = path.read_text(encoding="utf-8")
        assert "roberta-static[" not in text, path
        for named in re.findall(r'pip install -c constraints\.txt (?:-e )?"\.\[([\w,]+)\]"', text):
            assert set(named.split(",")) <= extras, (path, named)
    assert "../" not in (ROOT / "README.md").read_text(encoding="utf-8")  # nothing outside it
