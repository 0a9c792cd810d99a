"""benchmarks/sentiment.py: the data reader, the cross-validated ridge and its scores, a tiny run."""

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import pearsonr

pytest.importorskip("model2vec", reason="the benchmark needs the [exports] extra")
pytest.importorskip("sentence_transformers", reason="the benchmark needs the [exports] extra")
sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import sentiment  # noqa: E402

WORDS = {"good": 2.0, "great": 3.0, "fine": 0.5, "dull": -1.5, "bad": -2.5, "awful": -3.5}


def write_snippets(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / sentiment.SNIPPETS).write_bytes("\r\n".join(lines).encode("utf-8"))
    return folder


def made_up(n: int) -> list[str]:
    """``n`` snippets whose valence is the mean of their sentiment words' values."""
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        words = list(rng.choice(list(WORDS), size=2))
        valence = np.mean([WORDS[w] for w in words])
        lines.append(f"{i + 1}\t{valence:.6f}\tThe cat was {words[0]} and the dog {words[1]}.")
    return lines


def test_reader_reads_crlf_lines_and_skips_blank_ones(tmp_path):
    folder = write_snippets(tmp_path, ["1\t2.26666666667\tA good film.", "", "2\t-0.6\tToo tepid "])
    texts, valence = sentiment.read_snippets(folder / sentiment.SNIPPETS)
    assert texts == ["A good film.", "Too tepid"]
    assert valence.tolist() == [2.26666666667, -0.6]


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ("3\tA film without a valence", "expected id<TAB>valence<TAB>text"),
        ("3\tpositive\tA film.", "valence 'positive' is not a number in [-4, 4]"),
        ("3\t4.5\tA film.", "valence '4.5' is not a number in [-4, 4]"),
        ("3\tnan\tA film.", "valence 'nan' is not a number in [-4, 4]"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, bad, problem):
    folder = write_snippets(tmp_path / "data", ["1\t1.0\tGood.", "2\t-1.0\tBad.", bad])
    work = tmp_path / "work"
    with pytest.raises(SystemExit) as stop:
        sentiment.main(["--data", str(folder), "--work", str(work)])
    message = str(stop.value.code)
    assert message.startswith(f"error: {folder / sentiment.SNIPPETS}:3: {problem}")
    assert "\n" not in message
    assert not work.exists()


def test_missing_file_and_bad_bytes_are_named(tmp_path):
    with pytest.raises(sentiment.DataError, match=r"no such file \(get it from cjhutto"):
        sentiment.read_snippets(tmp_path / sentiment.SNIPPETS)
    path = tmp_path / sentiment.SNIPPETS
    path.write_bytes(b"1\t1.0\tGood.\n2\t1.0\tCaf\xe9.\n")
    with pytest.raises(sentiment.DataError, match=rf"{path.name}:2: not UTF-8"):
        sentiment.read_snippets(path)


def test_folds_are_a_fixed_partition_into_near_equal_parts():
    ids = sentiment.fold_ids(23)
    assert np.bincount(ids).tolist() == [5, 5, 5, 4, 4]
    assert np.array_equal(ids, sentiment.fold_ids(23))
    assert not np.array_equal(ids, np.arange(23) % 5)  # shuffled


def test_ridge_predictions_are_the_closed_form_with_an_intercept():
    rng = np.random.default_rng(0)
    x, y, x_eval = rng.normal(size=(30, 4)) + 3, rng.normal(size=30), rng.normal(size=(5, 4))
    alphas = np.array([0.1, 10.0])
    predicted = sentiment.ridge_predictions(x, y, x_eval, alphas)
    centered = x - x.mean(axis=0)
    for row, alpha in zip(predicted, alphas, strict=True):
        coef = np.linalg.solve(
            centered.T @ centered + alpha * np.eye(4), centered.T @ (y - y.mean())
        )
        np.testing.assert_allclose(row, (x_eval - x.mean(axis=0)) @ coef + y.mean())


def test_the_penalty_is_chosen_without_the_test_fold():
    """Scrambling one fold's labels changes nothing predicted for that fold."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 20))
    y = x @ rng.normal(size=20) + rng.normal(size=200)
    predicted, alphas = sentiment.cross_validated(x, y)
    held = sentiment.fold_ids(200) == 0
    scrambled = y.copy()
    scrambled[held] = rng.normal(scale=100, size=held.sum())
    again, alphas_again = sentiment.cross_validated(x, scrambled)
    np.testing.assert_allclose(again[held], predicted[held])
    assert alphas_again[0] == alphas[0]
    assert alphas_again[1:] != alphas[1:]  # the other folds did see the scrambled labels
    assert pearsonr(predicted, y).statistic > 0.9


def test_scores_are_pearson_and_sign_accuracy_on_polar_items():
    predicted = np.array([1.0, -0.5, 0.2, -2.0, 0.1])
    valence = np.array([2.0, 1.0, 0.4, -1.5, -0.5])  # 0.4 is not polar; 1.0 and -0.5 are misses
    pearson, accuracy = sentiment.scores(predicted, valence)
    assert pearson == pytest.approx(pearsonr(predicted, valence).statistic)
    assert accuracy == 0.5


def test_a_tiny_run_prints_every_row_and_reuses_its_cache(tmp_path, bert_dir, capsys):
    data = write_snippets(tmp_path / "data", made_up(40))
    argv = ["--data", str(data), "--work", str(tmp_path / "work"), "--model", str(bert_dir)]
    argv += ["--finetune-steps", "2", "--finetune-max-length", "32", "--w2v-epochs", "1"]
    sentiment.main([*argv, "--background-lines", "3"])
    first = capsys.readouterr().out
    cached = sorted(p.name for p in (tmp_path / "work").iterdir())
    sentiment.main([*argv, "--background-lines", "3"])
    second = capsys.readouterr().out
    table = [line for line in second.splitlines() if line.startswith("| ")]
    # Header and rule, MiniLM, then 6 static vectors x (spaCy mean, weighted, 2 exports), and the
    # tuned vectors through spaCy (mean, weighted) and the export.
    assert len(table) == 2 + 1 + 6 * 4 + 3
    assert "| ours tuned (snippets), spaCy doc.vector, doc_vector weighted | " in second
    assert "| ours tuned (snippets), spaCy doc.vector, doc_vector mean | " in second
    assert "model2vec + tokenlearn: skipped (no --tokenlearn-python)" in second
    assert "| ours (snippets), spaCy doc.vector, doc_vector weighted | " in second
    assert table[2].startswith("| MiniLM itself, sentence encoder (mean pooling) | ")
    assert "| ours (snippets + Wikipedia), model2vec export, --remove-top-pcs 4 " in second
    assert first.count(" entries in ") == 6 and " entries in " not in second
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == cached
