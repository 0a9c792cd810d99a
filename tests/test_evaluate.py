from __future__ import annotations

import json

import numpy as np
import pytest
from gensim.models import KeyedVectors

from roberta_static.errors import DatasetError
from roberta_static.quality.evaluate import (
    dataset_path,
    evaluate_analogies,
    evaluate_pairs,
    find_key,
    read_pairs,
)


def ranks(values):
    """Average ranks (ties share the mean of their positions), written out by hand."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            result[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return result


def correlation(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))


@pytest.fixture()
def kv():
    rng = np.random.default_rng(3)
    words = ["cat", "dog", "car", "truck", "apple", "pear"]
    vectors = KeyedVectors(5)
    vectors.add_vectors(words, rng.normal(size=(6, 5)).astype(np.float32))
    return vectors


def test_spearman_and_pearson_match_an_independent_computation(kv, tmp_path):
    pairs = [
        ("cat", "dog", 8.0),
        ("Car", "truck", 7.5),
        ("apple", "pear", 7.5),
        ("cat", "apple", 1.0),
        ("dog", "truck", 2.0),
        ("pear", "unicorn", 3.0),
        ("cat", "car", 0.5),
    ]
    path = tmp_path / "pairs.tsv"
    path.write_text("# comment\n" + "\n".join(f"{a}\t{b}\t{s}" for a, b, s in pairs) + "\n")
    result = evaluate_pairs(kv, path, lower=True)
    covered = [(a, b, s) for a, b, s in pairs if b != "unicorn"]
    cosines = []
    for a, b, _ in covered:
        va, vb = kv[a.lower()], kv[b.lower()]
        cosines.append(float(va @ vb / np.linalg.norm(va) / np.linalg.norm(vb)))
    humans = [s for _, _, s in covered]
    assert result.pairs == 7 and result.covered == 6
    assert result.oov_pairs == [("pear", "unicorn")]
    assert result.coverage == pytest.approx(600 / 7)
    assert result.spearman == pytest.approx(
        100 * correlation(ranks(cosines), ranks(humans)), abs=1e-6
    )
    assert result.pearson == pytest.approx(100 * correlation(cosines, humans), abs=1e-4)
    assert evaluate_pairs(kv, path, lower=False).covered == 5  # "Car" needs lower-casing


def test_bundled_datasets_and_bad_files(tmp_path):
    assert len(read_pairs(dataset_path("simlex999")[1])) == 999
    assert len(read_pairs(dataset_path("ws353")[1])) == 353
    with pytest.raises(DatasetError, match="no such file, nor a bundled dataset"):
        dataset_path("nothing-here")
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\t1\nc\td\n")
    with pytest.raises(DatasetError, match=r"bad.tsv:2: expected word1<TAB>word2<TAB>score"):
        read_pairs(bad)


def test_analogies(tmp_path):
    kv = KeyedVectors(3)
    kv.add_vectors(
        ["king", "queen", "man", "woman", "paris", "france"],
        np.array(
            [[1, 1, 0], [1, 0, 1], [0, 1, 0], [0, 0, 1], [5, 5, 5], [-5, 2, 9]], dtype=np.float32
        ),
    )
    path = tmp_path / "analogies.txt"
    path.write_text(
        ": family\nman woman king queen\nman king woman queen\n: other\nman woman rome italy\n"
    )
    result = evaluate_analogies(kv, path)
    assert (result.questions, result.covered, result.correct) == (3, 2, 2)
    assert result.accuracy == 100.0


def test_find_key_tries_lower_case_and_word2vec_phrase_spelling():
    kv = KeyedVectors(2)
    kv.add_vectors(["new_york", "Paris", "cat"], np.eye(3, 2, dtype=np.float32))
    assert find_key(kv, "New York", lower=True) == "new_york"
    assert find_key(kv, "New York", lower=False) is None
    assert find_key(kv, "Paris", lower=False) == "Paris"
    assert find_key(kv, "CAT", lower=True) == "cat"
    assert find_key(kv, "dog", lower=True) is None


def test_pair_files_with_a_byte_order_mark_and_nfd_words_are_covered(tmp_path):
    kv = KeyedVectors(2)
    kv.add_vectors(["caf\u00e9", "tea", "cat"], np.array([[1, 0], [1, 1], [0, 1]], np.float32))
    assert find_key(kv, "Cafe\u0301", lower=True) == "caf\u00e9"
    path = tmp_path / "pairs.tsv"
    path.write_bytes("\ufeffcat\ttea\t5\ncafe\u0301\ttea\t8\ncat\tcafe\u0301\t1\n".encode())
    assert read_pairs(path)[0] == ("cat", "tea", 5.0)
    assert evaluate_pairs(kv, path, lower=True).covered == 3


@pytest.mark.parametrize(
    "covered,pairs", [(0, 353), (3, 999), (49, 60), (50, 100), (50, 101), (499, 999), (500, 999)]
)
def test_low_coverage_means_under_50_items_or_under_half_the_dataset(covered, pairs):
    from roberta_static.quality.evaluate import AnalogyScores, PairScores

    expected = covered < 50 or covered / pairs < 0.5
    assert PairScores("d", pairs, covered, 0.0, 0.0).low_coverage is expected
    assert AnalogyScores("d", pairs, covered, 0).low_coverage is expected


def write_pairs(path, pairs):
    path.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in pairs))
    return path


@pytest.fixture()
def vectors_folder(tmp_path):
    from roberta_static.vectors.static import StaticVectors

    words = [f"w{i}" for i in range(8)]
    matrix = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    return StaticVectors(words, matrix, np.ones(8)).save(tmp_path / "vectors")


def test_evaluate_cautions_on_thin_coverage_and_never_prints_nan(vectors_folder, tmp_path):
    from typer.testing import CliRunner

    from roberta_static.cli import app

    # 3 covered pairs among 60, and a dataset none of whose 20 pairs is covered
    thin = [("w0", "w1", 3), ("w2", "w3", 1), ("w4", "w5", 2)] + [("x", "y", 1)] * 57
    thin_file = write_pairs(tmp_path / "thin.tsv", thin)
    none_file = write_pairs(tmp_path / "none.tsv", [("x", "y", 1)] * 20)
    args = [
        "evaluate",
        str(vectors_folder),
        "--dataset",
        str(thin_file),
        "--dataset",
        str(none_file),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "warning: thin.tsv: scores on 3 of 60 pairs (5.0%) mean little" in result.output
    assert "warning: none.tsv: none of its 20 pairs is covered; no score" in result.output
    assert "nan" not in result.output.lower()

    as_json = CliRunner().invoke(app, [*args, "--json"])
    report = json.loads(as_json.stdout, parse_constant=lambda name: pytest.fail(f"{name} in JSON"))
    thin_scores, none_scores = report["datasets"]
    assert thin_scores["low_coverage"] and none_scores["low_coverage"]
    assert none_scores["spearman"] is None and np.isfinite(thin_scores["spearman"])


def test_evaluate_is_quiet_on_enough_coverage(vectors_folder, tmp_path):
    from typer.testing import CliRunner

    from roberta_static.cli import app

    rng = np.random.default_rng(1)
    pairs = [(f"w{a}", f"w{b}", float(rng.random())) for a, b in rng.integers(0, 8, (60, 2))]
    path = write_pairs(tmp_path / "full.tsv", pairs + [("x", "y", 1)] * 10)
    result = CliRunner().invoke(app, ["evaluate", str(vectors_folder), "--dataset", str(path)])
    assert result.exit_code == 0 and "warning" not in result.output, result.output


def test_phrases_are_found_in_either_spelling():
    folder_style, word2vec_style = KeyedVectors(2), KeyedVectors(2)
    folder_style.add_vectors(["new york"], np.ones((1, 2), np.float32))
    word2vec_style.add_vectors(["new_york"], np.ones((1, 2), np.float32))
    for query in ("new york", "new_york", "New_York"):
        assert find_key(folder_style, query, lower=True) == "new york"
        assert find_key(word2vec_style, query, lower=True) == "new_york"


@pytest.mark.parametrize(
    "content,message",
    [
        ("word1\tword2\tscore\ncat\tdog\t7\n", r"x.tsv:1: score 'score' is not a number; a header"),
        ("cat\tdog\t7\ncat\ttea\thigh\n", r"x.tsv:2: score 'high' is not a number$"),
        ("cat\tdog\t7\n# note\ncat\ttea\tnan\n", r"x.tsv:3: score 'nan' is not a finite number"),
        ("cat\tdog\t-inf\n", r"x.tsv:1: score '-inf' is not a finite number"),
        ("cat\t\t7\n", r"x.tsv:1: expected word1<TAB>word2<TAB>score"),
        ("cat\tdog\t7\textra\n", r"x.tsv:1: expected word1<TAB>word2<TAB>score; found 4 fields"),
    ],
)
def test_a_bad_pair_line_is_named_with_its_problem(tmp_path, content, message):
    path = tmp_path / "x.tsv"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        read_pairs(path)


def test_a_header_marked_as_a_comment_is_skipped_as_gensim_does(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("# word1\tword2\tscore\ncat\tdog\t7\n")
    assert read_pairs(path) == [("cat", "dog", 7.0)]
    kv = KeyedVectors(2)
    kv.add_vectors(["cat", "dog", "tea"], np.array([[1, 0], [0.6, 0.8], [0, 1]], np.float32))
    path.write_text("# word1\tword2\tscore\ncat\tdog\t7\ncat\ttea\t2\ndog\ttea\t1\n")
    assert kv.evaluate_word_pairs(str(path))[2] == 0  # gensim reads the same pairs


def test_an_undecodable_pair_file_is_one_error(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_bytes(b"caf\xe9\tdog\t7\n")
    with pytest.raises(DatasetError, match="x.tsv: cannot read word pairs"):
        read_pairs(path)


def test_evaluate_names_the_bad_line_in_one_line(vectors_folder, tmp_path):
    from typer.testing import CliRunner

    from roberta_static.cli import app

    path = write_pairs(tmp_path / "x.tsv", [("w0", "w1", 3)])
    path.write_text("w0\tw1\tscore\n" + path.read_text())
    result = CliRunner().invoke(app, ["evaluate", str(vectors_folder), "--dataset", str(path)])
    assert result.exit_code == 1
    assert result.output == (
        f"error: {path}:1: score 'score' is not a number; a header line must start with #\n"
    )
