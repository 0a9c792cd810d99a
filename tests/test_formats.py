"""The formats registry: every format we write reads back, and every command that reads vectors
opens each of them (similar, evaluate, report, postprocess, the spaCy component)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_atomic import snapshot
from typer.testing import CliRunner

from roberta_static.cli import app
from roberta_static.errors import ConfigError, VectorsError
from roberta_static.formats.exports import EXPORTS, FORMATS, export
from roberta_static.formats.native import FORMAT, FORMAT_VERSION
from roberta_static.vectors.data import rank_counts
from roberta_static.vectors.postprocess import PostProcessing, postprocess
from roberta_static.vectors.static import StaticVectors

WORDS = ["the", "cat", "dog", "new york", "paris", "city", "kitten", "puppy", "town", "zebra"]
PAIRS = [("cat", "kitten", 9.0), ("dog", "puppy", 8.5), ("paris", "city", 7.0), ("cat", "town", 1)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A tiny vectors folder (one entry filled, count 0) with every export beside it."""
    rng = np.random.default_rng(7)
    meta = {
        "config": {"case": "lower", "layers": "all", "combine": "mean", "pool": "mean"},
        "model": {"name": "tiny/model", "sha256": "abc123"},
        "corpus": [{"path": "corpus.txt", "bytes": 42}],
    }
    counts = np.array([90, 12, 7, 3, 20, 5, 2, 2, 9, 0])
    vectors = StaticVectors(WORDS, rng.normal(size=(len(WORDS), 8)), counts, meta)
    path = tmp_path_factory.mktemp("formats") / "vectors"
    vectors.save(path)
    export(path, EXPORTS)
    return path


def at(folder, fmt):
    return folder / FORMATS[fmt].path


def run(*args):
    """The command's standard output (warnings go to stderr)."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def spelled(word: str, fmt: str) -> str:
    """An entry as the format writes it: phrases joined by ``_`` outside native and .kv."""
    return word if fmt in ("native", "kv") else word.replace(" ", "_")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_reads_back_its_entries_vectors_counts_and_meta(folder, fmt):
    source = StaticVectors.load(folder)
    read = StaticVectors.load(at(folder, fmt), allow_pickle=True)
    family = FORMATS[fmt].family
    rows = source.rows_by_count if family == "gensim" else np.arange(len(source))  # gensim sorts
    assert read.words == [spelled(source.words[row], fmt) for row in rows]
    np.testing.assert_allclose(read.vectors, source.vectors[rows], atol=1e-6)
    counts = rank_counts(len(rows)) if family == "static_encoder" else source.counts[rows]
    np.testing.assert_array_equal(read.counts, counts)
    assert read.meta == ({} if family == "gensim" else source.meta)  # a model card carries it
    np.testing.assert_allclose(read["New York"], source["new york"], atol=1e-6)


@pytest.mark.parametrize(
    "command",
    [["similar", "{kv}", "cat"], ["info", "{kv}"], ["postprocess", "{kv}", "{out}", "--center"]],
)
def test_a_kv_pickle_is_opened_only_with_allow_pickle(folder, command, tmp_path):
    # A .kv file is a pickle, which can run code when loaded: every command asks first.
    args = [a.format(kv=at(folder, "kv"), out=tmp_path / "out") for a in command]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and not (tmp_path / "out").exists()
    assert result.output.startswith("error: --allow-pickle: needed for ")
    assert len(result.output.strip().splitlines()) == 1
    with pytest.raises(ConfigError, match="^allow_pickle: needed for .*vectors.kv, a pickle"):
        StaticVectors.load(at(folder, "kv"))


@pytest.mark.parametrize("fmt", EXPORTS)
def test_similar_opens_every_format(folder, fmt):
    def neighbours(path):
        lines = run("similar", path, "cat", "-n", "4", "--allow-pickle").splitlines()
        return [(w.replace("_", " "), float(s)) for s, w in (line.split("\t") for line in lines)]

    expected, found = neighbours(folder), neighbours(at(folder, fmt))
    assert [w for w, _ in found] == [w for w, _ in expected]
    np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], atol=1e-4)


@pytest.mark.parametrize("fmt", EXPORTS)
def test_info_opens_every_format(folder, fmt):
    vectors = StaticVectors.load(folder)
    shown = run("info", at(folder, fmt), "--allow-pickle").splitlines()
    assert shown[0].endswith(f": {len(vectors):,} entries x {vectors.dim} dimensions")
    # A section the format does not store (a word2vec file has no model or stats) is left out.
    headings = [i for i, line in enumerate(shown) if line in ("model:", "config:", "stats:")]
    assert all(i + 1 < len(shown) and shown[i + 1].startswith("  ") for i in headings)


@pytest.mark.parametrize("fmt", EXPORTS)
def test_evaluate_opens_every_format(folder, fmt, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{score}\n" for a, b, score in PAIRS))

    def scores(path):
        report = json.loads(run("evaluate", path, "-d", pairs, "--json", "--allow-pickle"))
        return report["datasets"][0]

    expected, found = scores(folder), scores(at(folder, fmt))
    assert found["covered"] == expected["covered"] == len(PAIRS)
    assert found["spearman"] == pytest.approx(expected["spearman"], abs=1e-6)


@pytest.mark.parametrize("fmt", EXPORTS)
def test_report_opens_every_format(folder, fmt, tmp_path):
    out = tmp_path / "report.html"
    run("report", at(folder, fmt), "-o", out, "--words", "cat,new york", "--allow-pickle")
    neighbours = out.read_text(encoding="utf-8").split('<section id="neighbours">')[1]
    assert "cat <span" in neighbours and f"{spelled('new york', fmt)} <span" in neighbours


@pytest.mark.parametrize("fmt", EXPORTS)
def test_postprocess_opens_every_format(folder, fmt, tmp_path):
    run("postprocess", at(folder, fmt), tmp_path / "out", "--center", "--allow-pickle")
    read = StaticVectors.load(at(folder, fmt), allow_pickle=True)
    expected = postprocess(read, PostProcessing(center=True))
    written = StaticVectors.load(tmp_path / "out")
    assert written.words == read.words
    assert written.meta == {"format": FORMAT, "format_version": FORMAT_VERSION, **expected.meta}
    np.testing.assert_allclose(written.vectors, expected.vectors, atol=1e-6)


@pytest.mark.parametrize("fmt", EXPORTS)
def test_spacy_component_opens_every_format(folder, fmt):
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("roberta_static", config={"vectors": str(at(folder, fmt)), "allow_pickle": True})
    doc = nlp("The Cat saw a zebra")
    source = StaticVectors.load(folder)
    np.testing.assert_allclose(doc[1].vector, source["cat"], atol=1e-6)  # looked up lower-cased
    np.testing.assert_allclose(doc[4].vector, source["zebra"], atol=1e-6)
    assert not doc[3].has_vector


def test_a_path_of_no_format_is_one_line_naming_it(folder, tmp_path):
    with pytest.raises(VectorsError, match=r"nope: no such vectors folder or file$"):
        StaticVectors.load(tmp_path / "nope")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("buy milk\n")
    with pytest.raises(
        VectorsError,
        match=r"notes: not a roberta-static vectors folder \(no vectors.npy\), nor a model2vec or "
        "sentence-transformers folder$",
    ):
        StaticVectors.load(tmp_path / "notes")
    transformer = tmp_path / "st"
    transformer.mkdir()
    (transformer / "config_sentence_transformers.json").write_text("{}")
    (transformer / "modules.json").write_text('[{"path": "", "type": "Transformer"}]')
    with pytest.raises(VectorsError, match="st: a sentence-transformers model without a Static"):
        StaticVectors.load(transformer)
    for name in ("vectors.npy", "vocab.tsv"):  # a file of a vectors folder: pass the folder
        with pytest.raises(
            VectorsError, match=rf"{name}: a file of the vectors folder \S+; pass the folder$"
        ):
            StaticVectors.load(folder / name)
    text = tmp_path / "words.txt"
    text.write_text("hello world\n")
    with pytest.raises(
        VectorsError, match=r"words.txt: not a word2vec file: expected a 'COUNT DIM' line"
    ):
        StaticVectors.load(text)
    # export() adds exports to a vectors folder only, never into an export.
    with pytest.raises(VectorsError, match="model2vec: not a roberta-static vectors folder"):
        export(at(folder, "model2vec"), ["kv"])


# Odd vocabularies: every format holds every entry apart, or the write is refused naming them.

PIECES = ["new", "york", "New", " ", "  ", "_", "\t", "\u00a0", "\n", "\u2028", "\u00e9", "e\u0301",
          "'", "n't", ".", "u.s.", "-", "[UNK]", "[unk]", "\u00bd", "\u00df", "\u0130", "\u039f\u03a3",
          "\u03bf\u03c3", "\u5317\u4eac", "x", ""]  # fmt: skip
ENTRY = st.one_of(st.lists(st.sampled_from(PIECES), max_size=3).map("".join), st.text(max_size=4))
# Where str.splitlines() ends a line: a vocab.tsv line cannot hold one.
LINE_BREAKS = {c for c in map(chr, range(0x10000)) if len(f"a{c}b".splitlines()) == 2}


def word2vec_refuses(words):
    keys = [word.replace(" ", "_") for word in words]
    odd_space = any(c.isspace() and c != " " for word in words for c in word)
    return "" in words or odd_space or len(set(keys)) < len(keys)


def encoder_keys(words, case):
    """Each entry as the tokenizers library normalises its ``_``-joined spelling."""
    from tokenizers import normalizers

    steps = [normalizers.NFC(), *([normalizers.Lowercase()] if case == "lower" else [])]
    normalizer = normalizers.Sequence(steps)
    return [normalizer.normalize_str(word.replace(" ", "_")) for word in words]


def encoder_refuses(words, case):
    keys = encoder_keys(words, case)
    return bool({"", "[UNK]"} & set(keys)) or len(set(keys)) < len(keys)


REFUSES = {
    "kv": lambda words, case: False,
    "word2vec": lambda words, case: word2vec_refuses(words),
    "word2vec-bin": lambda words, case: word2vec_refuses(words),
    "model2vec": encoder_refuses,
    "sentence-transformers": encoder_refuses,
}


def assert_held(path, fmt, source, case):
    """Read back by our reader and by the format's own library: every entry, with its vector."""
    expected = source.vectors
    read = StaticVectors.load(path, allow_pickle=True)
    assert len(read) == len(source)
    np.testing.assert_allclose(read.vectors, expected, atol=1e-6)  # counts descend: row order
    if fmt in ("kv", "word2vec", "word2vec-bin"):
        from gensim.models import KeyedVectors

        if fmt == "kv":
            keyed, keys = KeyedVectors.load(str(path)), source.words
        else:
            binary, counts = fmt == "word2vec-bin", str(path.with_suffix(".vocab"))
            keyed = KeyedVectors.load_word2vec_format(str(path), fvocab=counts, binary=binary)
            keys = [word.replace(" ", "_") for word in source.words]
        assert keyed.index_to_key == keys == read.words
        np.testing.assert_allclose(keyed[keys], expected, atol=1e-6)
        assert [keyed.get_vecattr(key, "count") for key in keys] == source.counts.tolist()
        return
    typed = [word.replace(" ", "_") for word in source.words]  # as a user types each entry
    assert read.words == encoder_keys(source.words, case)
    if fmt == "model2vec":
        encoded = model2vec_model(path).encode(typed)
    else:
        encoded = sentence_transformer(path).encode(typed)
    np.testing.assert_allclose(encoded, expected, atol=1e-6)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    words=st.lists(ENTRY, min_size=1, max_size=6, unique=True),
    case=st.sampled_from(["lower", "keep"]),
)
@example(words=["new york", "new_york", "state"], case="lower")  # the report of issue 38
@example(words=["Paris", "paris"], case="lower").via("lower-cased twice")
@example(words=["Paris", "paris"], case="keep")
@example(words=["caf\u00e9", "cafe\u0301"], case="keep").via("NFC and NFD")
@example(words=["[UNK]", "cat"], case="keep")
@example(words=["don't", "u.s.", "x\u00bd", "n't"], case="lower").via("cut by the split")
@example(words=["a\tb", "a b"], case="keep")
@example(words=["a\nb"], case="keep")
@example(words=["", "cat"], case="keep")
def test_odd_vocabularies_are_held_whole_in_every_format_or_refused(words, case, tmp_path_factory):
    rng = np.random.default_rng(len(words))
    counts = np.arange(len(words), 0, -1) * 3
    meta = {"config": {"case": case}}
    source = StaticVectors(words, rng.normal(size=(len(words), 4)), counts, meta)
    folder = tmp_path_factory.mktemp("odd") / "vectors"
    if any(c in LINE_BREAKS for word in words for c in word):
        with pytest.raises(
            VectorsError, match="^a vectors folder cannot hold every entry: .* line"
        ):
            source.save(folder)
        assert not folder.exists()
        return
    source.save(folder)
    for fmt in EXPORTS:
        before = snapshot(folder)
        try:
            export(folder, [fmt])
        except VectorsError as error:
            assert REFUSES[fmt](words, case), error
            assert str(error).startswith(
                f"{folder}: the {fmt} export cannot hold every entry apart"
            )
            assert snapshot(folder) == before
            continue
        assert not REFUSES[fmt](words, case), fmt
        assert_held(at(folder, fmt), fmt, source, case)


def model2vec_model(folder):
    static = pytest.importorskip("model2vec", reason="the test extra installs model2vec")
    return static.StaticModel.from_pretrained(folder)


def sentence_transformer(folder):
    st_models = pytest.importorskip("sentence_transformers", reason="the exports extra")
    return st_models.SentenceTransformer(str(folder), device="cpu")


def test_exports_are_added_beside_one_that_exists_sharing_its_counts_file(tmp_path):
    source = StaticVectors(
        WORDS, np.random.default_rng(3).normal(size=(10, 4)), np.arange(10, 0, -1)
    )
    folder = source.save(tmp_path / "ny")
    run("export", folder, "--formats", "word2vec")
    counts = (folder / "vectors.vocab").read_bytes()
    # Before, this failed naming vectors.vocab and wrote neither.
    added = run("export", folder, "--formats", "word2vec-bin,sentence-transformers")
    assert added == f"wrote {folder / 'sentence-transformers'}\nwrote {folder / 'vectors.bin'}\n"
    assert (folder / "vectors.vocab").read_bytes() == counts
    for fmt in ("word2vec", "word2vec-bin", "sentence-transformers"):
        np.testing.assert_allclose(StaticVectors.load(at(folder, fmt)).vectors, source.vectors)
    # One asked for again is named, with the way out; the others asked with it are not written.
    before = snapshot(tmp_path)
    result = CliRunner().invoke(app, ["export", str(folder), "--formats", "word2vec,model2vec,kv"])
    assert result.exit_code == 1 and snapshot(tmp_path) == before
    assert result.output == (
        f"error: {folder / 'vectors.txt'} (the word2vec export): exists; pass --overwrite to "
        "replace it, or leave word2vec out of --formats\n"
    )
    result = CliRunner().invoke(
        app, ["export", str(folder), "--formats", "word2vec,sentence-transformers"]
    )
    assert result.output == (
        f"error: {folder / 'vectors.txt'} (the word2vec export), {folder / 'sentence-transformers'}"
        " (the sentence-transformers export): exist; pass --overwrite to replace them, or leave "
        "word2vec and sentence-transformers out of --formats\n"
    )
